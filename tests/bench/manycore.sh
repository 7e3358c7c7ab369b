#!/bin/bash
# Issue 34's many-core figures in one pass, for a lent 16-core machine
# (../shared/tools/README.md: a release build packed by devpack.sh).
#
#   [SMOKE=1] tests/bench/manycore.sh BUILD_DIR OUT_DIR [STEP...]
#
# SMOKE=1 divides the iterations by 50 (a check that every step runs,
# before a lease is spent on it).
# Each step runs one bench script under its own time limit and writes
# OUT_DIR/STEP.txt (the script's output and its exit status); the steps
# run in the order of their importance, so that a pass cut short still
# leaves the first ones.  STEP defaults to all of them:
#   scale-ofi-ucx  gw-scale.sh ofi+tcp -> ucx+tcp, 8 clients, 4 servers,
#                  threads 1 2 4 8 against 2, 4 and 8 single-worker
#                  processes, 2 rounds
#   srv-scale      srv-scale.sh ofi+tcp, --contexts 1, 2 and 4, 8 clients
#   scale-shm      gw-scale.sh shm -> shm, threads 1 2 4 8, 8 processes
#   bulk-multi     gw-ofi-shm.sh multi: 4 clients pulling 64 MiB at once
#   overflow       gw-ofi-shm.sh overflow: 8-256 KiB requests
#   bulk-ucx       gw-bulk-bench.sh: 64 MiB through ofi+tcp -> ucx+tcp
#   hop            gw-bench.sh: the added round trip over shm, ofi+tcp,
#                  ucx+tcp and the minimal TCP relay (blocking)
#   scale-24       gw-scale.sh ofi+tcp -> ucx+tcp, threads 2 and 4 against
#                  2 and 4 processes, 2 rounds
#   ab-shm, ab-ofi gw-scale.sh with BUILD_DIR/gateway/causewayd-base (an
#                  earlier build put there by hand) and causewayd
#                  alternated, 2 rounds: shm -> shm threads 1 and 8 and 8
#                  processes; ofi+tcp -> ucx+tcp threads 8 and 8 processes
set -u
B=$(cd "$1" && pwd)
O=$(mkdir -p "$2" && cd "$2" && pwd)
shift 2
STEPS=${*:-"scale-ofi-ucx srv-scale scale-shm bulk-multi overflow bulk-ucx hop"}
cd "$(dirname "$0")/../.."
if [ -d "$B/dev" ]; then
    D=$B/dev
    export LD_LIBRARY_PATH=$D/syslibs UCX_MODULE_DIR=$D/ucx-modules PATH=$D/bin:$PATH
    # gw-bench.sh calls /usr/bin/time, absent there; this copy is thrown away
    [ -x /usr/bin/time ] || sed -i "s#/usr/bin/time#$D/bin/time#" tests/bench/gw-bench.sh
fi
{
    echo "cpus: $(nproc) of $(getconf _NPROCESSORS_ONLN)"
    grep -m1 'model name' /proc/cpuinfo
    uname -srm
    echo "load: $(cat /proc/loadavg)"
    df -h /dev/shm | tail -n 1
    echo "open files: $(ulimit -n)"
    date -u +%FT%TZ
} >"$O/machine.txt"
cat "$O/machine.txt"

F=1
[ "${SMOKE:-0}" = 1 ] && F=50
step() { # NAME LIMIT VAR=VALUE... -- CMD...
    local name=$1 limit=$2 rc
    shift 2
    echo "== $name ($(date -u +%T), limit ${limit}s)"
    timeout -k 5 "$limit" env "$@" >"$O/$name.txt" 2>&1
    rc=$?
    echo "exit $rc, load $(cut -d' ' -f1-3 /proc/loadavg)" >>"$O/$name.txt"
    cat "$O/$name.txt"
}

for s in $STEPS; do
    case $s in
    scale-ofi-ucx)
        step "$s" 160 N=8 S=4 ITERS=$((50000 / F)) THREADS="1 2 4 8" PROCS="2 4 8" ROUNDS=2 \
            IN=ofi+tcp OUT=ucx+tcp bash tests/bench/gw-scale.sh "$B" ;;
    scale-24)
        step "$s" 100 N=8 S=4 ITERS=$((50000 / F)) THREADS="2 4" PROCS="2 4" ROUNDS=2 \
            IN=ofi+tcp OUT=ucx+tcp bash tests/bench/gw-scale.sh "$B" ;;
    srv-scale)
        step "$s" 80 N=8 CONTEXTS="1 2 4" ITERS=$((50000 / F)) REPS=1 ROUNDS=2 \
            bash tests/bench/srv-scale.sh "$B" ofi+tcp ;;
    scale-shm)
        step "$s" 90 N=8 S=4 ITERS=$((200000 / F)) THREADS="1 2 4 8" PROCS="8" ROUNDS=1 \
            IN=shm OUT=shm bash tests/bench/gw-scale.sh "$B" ;;
    bulk-multi)
        step "$s" 70 MODE=multi NCLI=4 SIZE=64M ITERS=4 REPS=3 ROUNDS=2 \
            bash tests/bench/gw-ofi-shm.sh "$B" ;;
    overflow)
        step "$s" 50 MODE=overflow LAT_ITERS=$((2000 / F)) REPS=3 ROUNDS=3 \
            bash tests/bench/gw-ofi-shm.sh "$B" ;;
    bulk-ucx)
        step "$s" 70 ITERS=8 REPS=3 SHM=0 RSS=0 GW_THREADS=auto \
            bash tests/bench/gw-bulk-bench.sh "$B" ;;
    hop)
        step "$s" 60 ITERS=$((20000 / F)) REPS=3 ROUNDS=3 MODES=blocking \
            bash tests/bench/gw-bench.sh "$B" shm ofi+tcp ucx+tcp tcp ;;
    ab-shm)
        step "$s" 150 bash -c 'for r in 1 2; do for g in causewayd-base causewayd; do
            echo "# round $r: $g"
            GWD=$0/gateway/$g N=8 S=4 ITERS=$1 THREADS="1 8" PROCS=8 IN=shm OUT=shm \
                bash tests/bench/gw-scale.sh "$0" || exit 1; done; done' "$B" $((200000 / F)) ;;
    ab-ofi)
        step "$s" 120 bash -c 'for r in 1 2; do for g in causewayd-base causewayd; do
            echo "# round $r: $g"
            GWD=$0/gateway/$g N=8 S=4 ITERS=$1 THREADS=8 PROCS=8 IN=ofi+tcp OUT=ucx+tcp \
                bash tests/bench/gw-scale.sh "$0" || exit 1; done; done' "$B" $((50000 / F)) ;;
    *) echo "manycore: no step '$s'" >&2; exit 2 ;;
    esac
done
