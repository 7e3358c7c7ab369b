# Shared helpers of the gateway integration tests (sourced, bash).
#   gw_*.sh CAUSEWAYD CW_PING CWCTL
# Every process started here is killed and reaped on exit; the temporary
# directory and the shm segments named after this test are removed.
set -u

CAUSEWAYD=$1
CW_PING=$2
CWCTL=$3
unset CAUSEWAY_ROUTES CAUSEWAY_GATEWAY CAUSEWAY_ADMIN
T=$(mktemp -d /tmp/cw-gwtest.XXXXXX)
TAG=gwt$$
PIDS=""
CLEANUP_HOOKS=""

GW_NAMESPACES=""
gw_cleanup() {
    for h in $CLEANUP_HOOKS; do $h; done
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    for p in $PIDS; do
        for _ in 1 2 3 4 5 6 7 8 9 10; do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1
        done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    for n in $GW_NAMESPACES; do ip netns del "$n" 2>/dev/null; done
    rm -rf "$T"
    rm -f /dev/shm/causeway-"$TAG"* 2>/dev/null
}
trap gw_cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    local n
    echo "FAIL: $*"
    for f in "$T"/*.log; do
        [ -s "$f" ] || continue
        # A crash: from its first line, not only the end of the report.
        n=$(grep -n -m1 -E "Assertion|terminated with signal|ERROR: AddressSanitizer|runtime error" "$f" | cut -d: -f1)
        if [ -n "$n" ]; then
            echo "--- $(basename "$f") (from line $n)"
            sed -n "$((n > 5 ? n - 5 : 1)),$((n + 40))p" "$f"
        fi
        echo "--- $(basename "$f") (last lines)"
        tail -n 15 "$f"
    done
    exit 1
}

pass() { echo "ok - $*"; }

# wait_for CMD...: retry for up to 10 s.
wait_for() {
    for _ in $(seq 200); do
        "$@" && return 0
        sleep 0.05
    done
    return 1
}

# A free port outside the ephemeral range (free_port.py).
free_port() {
    python3 "$(dirname "${BASH_SOURCE[0]}")/free_port.py"
}

# start_echo NAME URI [DELAY_MS] [PREFIX...]: echo server; sets $NAME (its
# address) and ${NAME}_PID.  PREFIX runs it (e.g. "ip netns exec ns").
start_echo() {
    local name=$1 uri=$2 delay=${3:-0}
    shift 3 2>/dev/null || shift $#
    rm -f "$T/$name.addr"
    "$@" "$CW_PING" --serve "$uri" --addr-file "$T/$name.addr" \
        --delay "$delay" 2>"$T/$name.log" &
    eval "${name}_PID=$!"
    PIDS="$PIDS $!"
    wait_for test -s "$T/$name.addr" || fail "echo server $name ($uri) did not start"
    eval "$name=\$(cat \"\$T/\$name.addr\")"
}

# plugin_available URI: true if an echo server can listen on URI here.
plugin_available() {
    local p
    rm -f "$T/probe.addr"
    "$CW_PING" --serve "$1" --addr-file "$T/probe.addr" 2>/dev/null &
    p=$!
    local rc=1
    for _ in $(seq 200); do
        if test -s "$T/probe.addr"; then rc=0; break; fi
        kill -0 "$p" 2>/dev/null || break # exited: no such plugin here
        sleep 0.05
    done
    kill -TERM "$p" 2>/dev/null
    wait "$p" 2>/dev/null
    return $rc
}

# gw_cfg_threads CONFIG: with CW_GW_THREADS=N set (the threaded runs of
# these tests), give the gateway section threads: N unless it sets threads
# itself.  Scripts that rewrite a config for a reload call it again.
gw_cfg_threads() {
    [ -n "${CW_GW_THREADS:-}" ] || return 0
    grep -q "threads:" "$1" && return 0
    sed -i "s/^gateway: *{/gateway: { threads: $CW_GW_THREADS,/" "$1"
}

# start_gw NAME CONFIG [PREFIX...]: gateway; sets ${NAME}_PID and, from its
# ready lines, ${NAME}_<network> addresses and ${NAME}_admin.
start_gw() {
    local name=$1 cfg=$2 k v
    shift 2
    gw_cfg_threads "$cfg"
    rm -f "$T/$name.ready"
    "$@" "$CAUSEWAYD" -c "$cfg" --log-level info --ready-fd 3 \
        3>"$T/$name.ready" 2>"$T/$name.log" &
    eval "${name}_PID=$!"
    PIDS="$PIDS $!"
    wait_for grep -qs "^ready$" "$T/$name.ready" || fail "gateway $name did not start"
    while read -r k v; do
        [ "$k" = ready ] && continue
        eval "${name}_${k}=\$v"
    done <"$T/$name.ready"
}

# tcp_shm_gw NAME "GATEWAY KEYS" [PREFIX...]: start gateway NAME (start_gw,
# optionally under PREFIX, e.g. ip netns exec NS) on ofi+tcp (tcp0) and
# shm (shm0) only: "gateway: { name: NAME, GATEWAY KEYS }".
tcp_shm_gw() {
    local name=$1 keys=$2
    shift 2
    cat >"$T/$name.yaml" <<YAML
gateway: { name: $name, $keys }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-$name" }
YAML
    start_gw "$name" "$T/$name.yaml" "$@"
}

# stop_pid PID: SIGTERM, wait (10 s at most); the exit status goes to
# $STOP_RC (not a subshell: only this shell can reap its children).
stop_pid() {
    local p=$1
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq 100); do
        kill -0 "$p" 2>/dev/null || break
        sleep 0.1
    done
    kill -KILL "$p" 2>/dev/null
    wait "$p"
    STOP_RC=$?
}

# gw_stop_clean NAME...: stop gateways with SIGTERM; each must exit 0 with
# no sanitizer report (leaks included) in its log.
gw_stop_clean() {
    local g p
    for g in "$@"; do
        eval "p=\${${g}_PID}"
        stop_pid "$p"
        [ "$STOP_RC" = 0 ] || {
            grep -A 24 "ERROR: \|leak of" "$T/$g.log" | head -n 120
            fail "gateway $g exited with status $STOP_RC"
        }
        grep -q "Sanitizer\|runtime error" "$T/$g.log" &&
            fail "gateway $g: $(grep -m 3 'Sanitizer\|runtime error' "$T/$g.log")"
    done
    pass "gateways $* stopped cleanly"
}

# ns_make NAME: a network namespace, deleted on exit, its loopback up;
# false where namespaces cannot be created (not root, no iproute2).
ns_make() {
    [ "$(id -u)" = 0 ] && command -v ip >/dev/null &&
        ip netns add "$1" 2>/dev/null || return 1
    GW_NAMESPACES="$GW_NAMESPACES $1"
    ip netns exec "$1" ip link set lo up || fail "lo up in $1"
}

# metrics_expect ADMIN [SAMPLE=VALUE...]: `cwctl metrics` is a valid
# Prometheus exposition (metrics_check.py) holding those samples.
metrics_expect() {
    local admin=$1
    shift
    "$CWCTL" --admin "$admin" metrics >"$T/metrics.txt" ||
        fail "cwctl metrics failed"
    python3 "$(dirname "${BASH_SOURCE[0]}")/metrics_check.py" "$@" \
        <"$T/metrics.txt" >"$T/metrics.check" ||
        fail "metrics: $(cat "$T/metrics.check")"
}

# http_get HOST:PORT PATH: the raw HTTP/1.0 answer of the admin interface.
http_get() {
    local fd
    exec {fd}<>"/dev/tcp/${1%:*}/${1##*:}" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&"$fd"
    timeout 5 cat <&"$fd"
    exec {fd}>&-
}

# ping_expect WHAT STATUS ARGS...: run cw-ping, require every call to end
# with STATUS (e.g. CW_OK).
ping_expect() {
    local what=$1 st=$2
    shift 2
    timeout 60 "$CW_PING" -q --expect "$st" "$@" >"$T/ping.out" 2>"$T/ping.err" ||
        fail "$what: expected $st: $(cat "$T/ping.out") $(tail -n 3 "$T/ping.err")"
    pass "$what: $(tail -n 1 "$T/ping.out")"
}

# json_num JSON KEY: first number for "KEY": in a JSON text.
json_num() {
    printf '%s' "$1" | grep -o "\"$2\":[0-9]*" | head -n 1 | cut -d: -f2
}
