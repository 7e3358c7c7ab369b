#!/bin/bash
# One server address on several contexts (cw-perf server --contexts N,
# cw_network_open_spread): aggregate rate and server CPU per RPC.
#
#   [N=8] [CONTEXTS="1 4"] [ITERS=20000] [REPS=3] [ROUNDS=1] [JSON=1]
#       tests/bench/srv-scale.sh [BUILD_DIR] [FABRIC]
#       FABRIC: shm, ofi+tcp (default) or ucx+tcp
#
# For each value in CONTEXTS a cw-perf server is started with that many
# contexts, then N cw-perf clients run at once, each with 16 64 B RPCs in
# flight (--test rate).  Printed per row: the sum of the clients' median
# rates, the server's CPU time (utime + stime from /proc/PID/stat, all
# threads) per request it served, and how its requests spread over its
# contexts (each context's count, as the server prints it on exit).  With
# ROUNDS=N the CONTEXTS values alternate N times.  On a machine with fewer
# cores than N clients plus the server's threads, the aggregate rate shows
# the scheduler more than the server: read the CPU per request there.
set -u
B=$(cd "${1:-build}" && pwd)
FABRIC=${2:-ofi+tcp}
N=${N:-8}
CONTEXTS=${CONTEXTS:-"1 4"}
ITERS=${ITERS:-20000}
REPS=${REPS:-3}
ROUNDS=${ROUNDS:-1}
. "$(dirname "$0")/bench_lib.sh" srvscale
PERF=$B/tools/cw-perf
median() { grep -o '"median":[0-9.]*' | head -n 1 | cut -d: -f2; }

case $FABRIC in
shm) LISTEN="shm://$TAG" ;;
ofi+tcp | ucx+tcp) LISTEN="$FABRIC://127.0.0.1:0" ;;
*) echo "srv-scale: fabric shm, ofi+tcp or ucx+tcp, not '$FABRIC'" >&2; exit 2 ;;
esac

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

one() {
    local nctx=$1 srv addr t0 t1 i sum served hz spread
    hz=$(getconf CLK_TCK)
    rm -f "$T/srv.addr"
    "${EP[@]}" "$PERF" server --listen "$LISTEN" --contexts "$nctx" \
        --addr-file "$T/srv.addr" >/dev/null 2>"$T/srv.log" &
    srv=$!
    PIDS="$PIDS $srv"
    wait_for test -s "$T/srv.addr" || { echo "server failed"; cat "$T/srv.log"; exit 1; }
    addr=$(cat "$T/srv.addr")
    t0=$(ticks "$srv")
    for i in $(seq "$N"); do
        timeout 300 "${EP[@]}" "$PERF" client --target "$addr" --test rate \
            --sizes 64 --inflight 16 --iters "$ITERS" --reps "$REPS" --json \
            >"$T/cli$i.json" 2>"$T/cli$i.err" &
    done
    wait $(jobs -p | grep -v "^$srv\$") 2>/dev/null
    t1=$(ticks "$srv")
    "$PERF" quit --target "$addr" >/dev/null 2>&1
    wait "$srv"
    sum=0
    for i in $(seq "$N"); do
        r=$(median <"$T/cli$i.json")
        [ -n "$r" ] || { echo "client $i failed:"; cat "$T/cli$i.err"; exit 1; }
        sum=$(awk -v a="$sum" -v b="$r" 'BEGIN { print a + b }')
    done
    served=$(awk '/served/ { s += $(NF - 1) } END { print s + 0 }' "$T/srv.log")
    spread=$(awk '/served/ { printf "%s%s", sep, $(NF - 1); sep = "/" }' "$T/srv.log")
    [ "$served" -gt 0 ] || { echo "server counted nothing"; cat "$T/srv.log"; exit 1; }
    if [ "${JSON:-0}" = 1 ]; then
        awk -v f="$FABRIC" -v c="$nctx" -v r="$sum" -v t=$((t1 - t0)) -v hz="$hz" \
            -v s="$served" -v sp="$spread" 'BEGIN {
            printf "{\"fabric\":\"%s\",\"contexts\":%d,\"rps\":%.0f,\"srv_cpu_us_per_rpc\":%.3f,\"spread\":\"%s\"}\n",
                f, c, r, t * 1e6 / hz / s, sp }'
    else
        awk -v f="$FABRIC" -v c="$nctx" -v r="$sum" -v t=$((t1 - t0)) -v hz="$hz" \
            -v s="$served" -v sp="$spread" 'BEGIN {
            printf "%-8s %8d %12.0f %16.3f  %s\n", f, c, r, t * 1e6 / hz / s, sp }'
    fi
}

[ "${JSON:-0}" = 1 ] || printf '%-8s %8s %12s %16s  %s\n' fabric contexts rps \
    srv_cpu_us/rpc served_per_context
for _ in $(seq "$ROUNDS"); do
    for c in $CONTEXTS; do
        one "$c"
    done
done
