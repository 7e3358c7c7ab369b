#!/bin/bash
# What resumability costs when nothing fails (docs/bulk-gateway.md,
# "Resume"): a 64 MiB checksummed pull and push through one gateway
#   client -[ofi+tcp]-> gw -[ucx+tcp]-> server   (chunk 1 MiB, depth 8)
# marked idempotent (the target delegates in 4 MiB windows, two in
# flight) and not (one delegation).  Median call time of REPS calls each
# (the server's check of pulled data is inside the call, the client's of
# pushed data is not).
#
#   [REPS=N] tests/bench/gw-resume-bench.sh [BUILD_DIR]
set -u
B=$(cd "${1:-build}" && pwd)
REPS=${REPS:-5}
. "$(dirname "$0")/bench_lib.sh" gwresbench
GWD=$B/gateway/causewayd
XFER=$B/tests/integration/test_gwbulk_xfer

"$XFER" serve "ucx+tcp://127.0.0.1:0" "$T/srv.addr" 2>"$T/srv.log" &
PIDS="$PIDS $!"
wait_for test -s "$T/srv.addr" || { echo "server failed"; exit 1; }
srv=$(cat "$T/srv.addr")
cat >"$T/gw.yaml" <<YAML
gateway: { name: gw, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
buffers: { chunk: 1MiB, depth: 8, staging: 64MiB }
limits: { max_bulk_bytes_inflight: 64MiB }
YAML
"$GWD" -c "$T/gw.yaml" --ready-fd 3 3>"$T/gw.ready" 2>"$T/gw.log" &
PIDS="$PIDS $!"
wait_for grep -qs "^ready$" "$T/gw.ready" || { echo "gateway failed"; cat "$T/gw.log"; exit 1; }
gw=$(awk '/^tcp0/{print $2}' "$T/gw.ready")

printf '%-6s %-6s %10s %10s\n' op mode median_ms MiB/s
for op in pull push; do
    for mode in plain idem; do
        : >"$T/ms"
        for _ in $(seq "$REPS"); do
            line=$(timeout 120 "$XFER" once "$srv@$gw" 64M "$op" "$mode" 60000 2>>"$T/client.err")
            set -- $line
            [ "${1:-}" = CW_OK ] || { echo "$op/$mode failed: $line"; exit 1; }
            echo "$2" >>"$T/ms"
        done
        med=$(sort -n "$T/ms" | awk '{a[NR]=$1} END{print a[int((NR+1)/2)]}')
        printf '%-6s %-6s %10s %10s\n' "$op" "$mode" "$med" \
            "$(awk -v m="$med" 'BEGIN{printf "%.0f", 64 * 1000 / m}')"
    done
done
