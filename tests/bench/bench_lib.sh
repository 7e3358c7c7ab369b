# Shared set-up of the tests/bench/*.sh scripts (bash), sourced as
#   . "$(dirname "$0")/bench_lib.sh" NAME
# after B (the build directory) is set: plugin path, a scratch directory $T,
# a tag $TAG for shm names, processes started in background go in $PIDS and
# are stopped (TERM, then KILL) on exit with $T and the tag's shm segments.
export CAUSEWAY_PLUGIN_PATH=$B/na-shm:$B/na-ofi:$B/na-ucx
T=$(mktemp -d "/tmp/cw-$1.XXXXXX")
TAG=$1$$
PIDS=""
cleanup() {
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    sleep 0.3 # sleep-ok: a grace before SIGKILL; nothing is checked here
    for p in $PIDS; do kill -KILL "$p" 2>/dev/null; wait "$p" 2>/dev/null; done
    rm -rf "$T"
    rm -f /dev/shm/causeway-"$TAG"* 2>/dev/null
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# wait_for CMD...: up to 10 s for CMD to succeed.
wait_for() {
    for _ in $(seq 200); do
        "$@" && return 0
        sleep 0.05 # sleep-ok: the poll interval of a bounded wait
    done
    return 1
}
# wait_file FILE PID [TRIES]: until FILE is not empty (an address file a
# server writes), or false if PID ended first or TRIES polls of 50 ms
# (default 200: 10 s) pass.
wait_file() {
    for _ in $(seq "${3:-200}"); do
        [ -s "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05 # sleep-ok: the poll interval of a bounded wait
    done
    return 1
}
# A free port outside the ephemeral range, never one handed out before in
# this run (free_port.py).
free_port() {
    CW_PORT_REGISTRY=${CW_PORT_REGISTRY:-${T:+$T/ports.taken}} \
        python3 "$(dirname "${BASH_SOURCE[0]}")/../integration/free_port.py"
}
# PIN=1 emulates a bridge node on this one host: the endpoints (cw-perf
# clients and servers, haproxy) run on CPU 0 and the gateways on CPU 1, so
# a gateway never takes CPU time from the endpoints and the direct runs get
# the same single CPU as the endpoints of the runs through a gateway.
# Prefix commands with "${EP[@]}" (endpoints) or "${GWP[@]}" (gateways).
EP=()
GWP=()
if [ "${PIN:-0}" = 1 ]; then
    if [ "$(getconf _NPROCESSORS_ONLN)" -lt 2 ] || ! command -v taskset >/dev/null; then
        echo "PIN=1 needs two CPUs and taskset" >&2
        exit 1
    fi
    EP=(taskset -c 0)
    GWP=(taskset -c 1)
    echo "PIN=1: endpoints on CPU 0, gateways on CPU 1"
fi
