#!/bin/bash
# Instructions per forwarded RPC: causewayd under valgrind's callgrind,
# against a cw-perf server measured the same way (the floor: one receive
# and answer per RPC).  Deterministic where timing on a small machine is
# not: the figure does not depend on the scheduler, only on the code path
# (and, a little, on how many messages each progress pass finds).
#
#   [ITERS=50000] [FABRIC=shm] [THREADS="1 4"] [INFLIGHT=16] [KEEP=DIR]
#   tests/bench/gw-instr.sh [BUILD_DIR]
#
# KEEP=DIR keeps the callgrind files there (server.cg, gatewayT.cg) for
# callgrind_annotate.
#
# For the server row, a cw-perf server runs under callgrind and one client
# sends ITERS 64 B RPCs (--test rate, INFLIGHT in flight) to it directly.
# For each T in THREADS, a cw-perf server (not instrumented) listens on
# FABRIC, a causewayd with gateway.threads: T runs under callgrind, and the
# client sends ITERS RPCs through it ("server@gateway").  The whole
# process's instructions (start-up included, from callgrind's summary) are
# divided by the RPCs served (the server's count, the client's warm-up
# included) or forwarded (the gateway's `forwarded` counter).  Use a release build (buildtype=release).
set -u
B=$(cd "${1:-build}" && pwd)
ITERS=${ITERS:-50000}
FABRIC=${FABRIC:-shm}
THREADS=${THREADS:-"1 4"}
INFLIGHT=${INFLIGHT:-16}
. "$(dirname "$0")/bench_lib.sh" gwinstr
PERF=$B/tools/cw-perf
GWD=$B/gateway/causewayd
CWCTL=$B/tools/cwctl
command -v valgrind >/dev/null || { echo "gw-instr: valgrind is needed" >&2; exit 1; }
listen_uri() {
    case $FABRIC in
    shm) echo "shm://$TAG-$1" ;;
    ofi+tcp | ucx+tcp) echo "$FABRIC://127.0.0.1:0" ;;
    *) echo "gw-instr: FABRIC shm, ofi+tcp or ucx+tcp, not '$FABRIC'" >&2; exit 2 ;;
    esac
}
[ -z "${KEEP:-}" ] || mkdir -p "$KEEP" || exit 2
# Total instructions ("summary: N" / "totals: N") of a callgrind output file.
ir_of() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }
counter() {
    "$CWCTL" --admin "$1" stats --json | grep -o "\"$2\":[0-9]*" |
        head -n 1 | cut -d: -f2
}
client() {
    timeout 600 "$PERF" client --target "$1" --test rate --sizes 64 \
        --inflight "$INFLIGHT" --iters "$ITERS" --reps 1 --verify \
        --json >"$T/cli.json" 2>"$T/cli.err" ||
        { echo "client failed: $(cat "$T/cli.err")" >&2; exit 1; }
}
VG=(valgrind --tool=callgrind --dump-instr=no --collect-jumps=no)

printf '%-10s %7s %10s %14s %12s\n' what threads rpcs instructions instr/rpc

# The floor: a server's receive-and-answer.
rm -f "$T/srv.addr"
"${VG[@]}" --callgrind-out-file="$T/srv.cg" "$PERF" server \
    --listen "$(listen_uri srv0)" --addr-file "$T/srv.addr" \
    >"$T/srv.out" 2>"$T/srv.log" &
srv=$!
PIDS="$PIDS $srv"
wait_for test -s "$T/srv.addr" || wait_for test -s "$T/srv.addr" ||
    { echo "server failed: $(cat "$T/srv.log")" >&2; exit 1; }
client "$(cat "$T/srv.addr")"
kill -TERM "$srv"
wait "$srv"
ir=$(ir_of "$T/srv.cg")
[ -z "${KEEP:-}" ] || cp "$T/srv.cg" "$KEEP/server.cg"
# What it served, warm-up included ("cw-perf: context I served N requests").
n=$(awk '/served [0-9]+ requests/ { s += $(NF - 1) } END { print s + 0 }' "$T/srv.log")
awk -v ir="$ir" -v n="$n" 'BEGIN {
    printf "%-10s %7s %10d %14d %12.0f\n", "server", "-", n, ir, n ? ir / n : 0 }'

# The gateway, in front of a server that is not instrumented.
rm -f "$T/srv1.addr"
"$PERF" server --listen "$(listen_uri srv1)" --addr-file "$T/srv1.addr" \
    >/dev/null 2>"$T/srv1.log" &
PIDS="$PIDS $!"
wait_for test -s "$T/srv1.addr" || { echo "server failed" >&2; exit 1; }
SRV=$(cat "$T/srv1.addr")
for th in $THREADS; do
    admin="127.0.0.1:$(free_port)"
    cat >"$T/gw.yaml" <<YAML
gateway: { name: instr, admin: "$admin", threads: $th }
networks:
  - { name: net0, address: "$(listen_uri gw$th)" }
routes:
  - { dest: "$SRV", via: net0 }
YAML
    rm -f "$T/gw.ready"
    "${VG[@]}" --callgrind-out-file="$T/gw$th.cg" "$GWD" -c "$T/gw.yaml" \
        --ready-fd 3 3>"$T/gw.ready" 2>"$T/gw.log" &
    gw=$!
    PIDS="$PIDS $gw"
    wait_for grep -q '^ready$' "$T/gw.ready" ||
        wait_for grep -q '^ready$' "$T/gw.ready" ||
        { echo "gateway failed: $(cat "$T/gw.log")" >&2; exit 1; }
    client "$SRV@$(awk '$1=="net0"{print $2}' "$T/gw.ready")"
    n=$(counter "$admin" forwarded)
    kill -TERM "$gw"
    wait "$gw" || { echo "gateway exited $?: $(tail -n 5 "$T/gw.log")" >&2; exit 1; }
    ir=$(ir_of "$T/gw$th.cg")
    [ -z "${KEEP:-}" ] || cp "$T/gw$th.cg" "$KEEP/gateway$th.cg"
    awk -v ir="$ir" -v n="$n" -v t="$th" 'BEGIN {
        printf "%-10s %7d %10d %14d %12.0f\n", "gateway", t, n, ir, n ? ir / n : 0 }'
done
