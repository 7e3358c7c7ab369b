#!/bin/bash
# RPC latency, rate and bulk bandwidth over every local transport, direct,
# in one run (the figures quoted in issue notes).  Server pinned to CPU 1,
# client to CPU 0; medians of REPS repetitions.
#
#   [REPS=N] [ITERS=N] tests/bench/rpc-bench.sh [BUILD_DIR]
#
# Run it on a quiet machine (busy-poll figures on 2 vCPUs are meaningless
# under load), e.g. with nice -n -15.
set -u
B=$(cd "${1:-build}" && pwd)
REPS=${REPS:-5}
ITERS=${ITERS:-20000}
export CAUSEWAY_PLUGIN_PATH=$B/na-shm:$B/na-ofi:$B/na-ucx:$B/na-verbs
addr=$(mktemp)
trap 'rm -f "$addr"' EXIT

run() { # uri busyflag test sizes extra...
    local uri=$1 busy=$2 t=$3 sizes=$4 sp
    shift 4
    : >"$addr"
    taskset -c 1 "$B/tools/cw-perf" server --listen "$uri" --addr-file "$addr" \
        $busy >/dev/null 2>&1 &
    sp=$!
    for _ in $(seq 100); do
        [ -s "$addr" ] && break
        sleep 0.05 # sleep-ok: the poll interval of a bounded wait
    done
    echo "## $uri $t ${busy:-blocking} $*"
    timeout 120 taskset -c 0 "$B/tools/cw-perf" client --target "$(cat "$addr")" \
        --test "$t" --sizes "$sizes" $busy "$@" 2>&1 | grep -v '^#'
    kill "$sp" 2>/dev/null
    wait "$sp" 2>/dev/null
}

for u in shm:// ofi+tcp://127.0.0.1:0 ucx+tcp://127.0.0.1:0; do
    run "$u" "" lat 64,4K --iters "$ITERS" --reps "$REPS"
    run "$u" --busy lat 64,4K --iters "$ITERS" --reps "$REPS"
    run "$u" "" rate 64 --inflight 16 --iters "$ITERS" --reps "$REPS"
done
run shm:// "" bw 1M,64M --reps "$REPS"
run ofi+tcp://127.0.0.1:0 "" bw 16M --reps "$REPS"
run ucx+tcp://127.0.0.1:0 "" bw 16M --reps "$REPS"
# Raw baselines: single-copy cross-memory attach (cw-na-bench) and plain
# libfabric tcp;ofi_rxm streaming (ofi-raw-bw).
echo "## raw process_vm_readv"
CAUSEWAY_PLUGIN_PATH=$B/na-shm "$B/tests/bench/cw-na-bench" --mode block \
    --runs 3 --iters 2000 shm:// 2>&1 | grep raw_readv
# (ofi-raw-bw forks its own target: one process, nothing to wait for.)
echo "## raw libfabric tcp;ofi_rxm (4 in flight, blocking)"
timeout 120 "$B/tests/bench/ofi-raw-bw" -w 4 -b -y 127.0.0.1 2>&1 | tail -n 6
