#!/bin/bash
# A gateway from ofi+tcp to shm against the same calls made directly over
# ofi+tcp, alternated in one run (issue 34's rows for a bridge node whose
# servers sit on its own shared memory):
#
#   MODE=multi     NCLI clients at once, client i pulling (then pushing)
#                  SIZE bytes ITERS times per repetition: directly from
#                  ofi+tcp server i, then through the gateway from shm
#                  server i ("server@gateway"); the aggregate is the sum
#                  of the clients' median MiB/s
#   MODE=overflow  one client, 64 B RPCs and RPCs whose request overflows
#                  the eager size (SIZES), round trip (median and p99)
#                  directly to an ofi+tcp server and through the gateway
#                  to a shm server
#
#   [MODE=multi|overflow] [NCLI=4] [SIZE=64M] [ITERS=4] [REPS=3]
#   [SIZES=64,8K,32K,64K,256K] [LAT_ITERS=2000] [ROUNDS=2]
#   [GW_THREADS=auto] [STAGING=512MiB] [JSON=1]
#       tests/bench/gw-ofi-shm.sh [BUILD_DIR]
#
# Each round prints the direct figure, the gateway's and their ratio
# (gateway / direct: above 1 is better for bandwidth, below 1 for round
# trips); with JSON=1 one object per round and size.  Timing runs: no
# --verify (the correctness of what moves is the tests' job and
# vs-mercury.sh's --verify runs).
set -u
B=$(cd "${1:-build}" && pwd)
MODE=${MODE:-multi}
NCLI=${NCLI:-4}
SIZE=${SIZE:-64M}
ITERS=${ITERS:-4}
REPS=${REPS:-3}
SIZES=${SIZES:-64,8K,32K,64K,256K}
LAT_ITERS=${LAT_ITERS:-2000}
ROUNDS=${ROUNDS:-2}
. "$(dirname "$0")/bench_lib.sh" gwofishm
PERF=$B/tools/cw-perf
GWD=$B/gateway/causewayd

server() { # NAME URI: sets $NAME to its address
    rm -f "$T/$1.addr"
    "$PERF" server --listen "$2" --addr-file "$T/$1.addr" >/dev/null 2>"$T/$1.log" &
    PIDS="$PIDS $!"
    wait_file "$T/$1.addr" $! || { echo "server $1 failed: $(cat "$T/$1.log")" >&2; exit 1; }
    eval "$1=\$(cat \"\$T/\$1.addr\")"
}

cat >"$T/gw.yaml" <<YAML
gateway: { name: ofishm, admin: "", threads: ${GW_THREADS:-auto} }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
buffers: { chunk: 1MiB, depth: 8, staging: ${STAGING:-512MiB} }
limits: { max_bulk_bytes_inflight: ${STAGING:-512MiB} }
YAML
"$GWD" -c "$T/gw.yaml" --ready-fd 3 3>"$T/gw.ready" 2>"$T/gw.log" &
PIDS="$PIDS $!"
wait_for grep -qs '^ready$' "$T/gw.ready" || { echo "gateway failed: $(cat "$T/gw.log")" >&2; exit 1; }
GW=$(awk '$1=="tcp0"{print $2}' "$T/gw.ready")

# Prints "size median p99" per size of a cw-perf JSON result (bw: per
# direction, "dir:size median p99").
fields() {
    python3 -c '
import json, sys
for r in json.load(sys.stdin)["results"]:
    k = (r["dir"] + ":" if "dir" in r else "") + str(r["size"])
    print(k, r["median"], r.get("p99_us", 0))' <"$1"
}

if [ "$MODE" = multi ]; then
    for i in $(seq "$NCLI"); do
        server "tcp$i" "ofi+tcp://127.0.0.1:0"
        server "shm$i" "shm://$TAG-s$i"
    done
    # multi KIND: all clients at once; prints "pull_sum push_sum"
    multi() {
        local i t
        for i in $(seq "$NCLI"); do
            if [ "$1" = direct ]; then eval "t=\$tcp$i"; else eval "t=\$shm$i@\$GW"; fi
            timeout 600 "$PERF" client --target "$t" --test bw --sizes "$SIZE" \
                --iters "$ITERS" --reps "$REPS" --json >"$T/m$i.json" 2>"$T/m$i.err" &
        done
        wait
        for i in $(seq "$NCLI"); do
            [ -s "$T/m$i.json" ] || { echo "client $i ($1) failed: $(cat "$T/m$i.err")" >&2; return 1; }
            fields "$T/m$i.json"
        done | awk '/^pull:/ { p += $2 } /^push:/ { q += $2 } END { printf "%.0f %.0f\n", p, q }'
    }
    [ "${JSON:-0}" = 1 ] || printf '%-6s %8s %14s %14s %14s %14s %10s %10s\n' round clients \
        direct_pull gw_pull direct_push gw_push pull_ratio push_ratio
    for r in $(seq "$ROUNDS"); do
        read -r dp dq <<<"$(multi direct)" || exit 1
        read -r gp gq <<<"$(multi gw)" || exit 1
        [ -n "$dp" ] && [ -n "$gp" ] || exit 1
        awk -v r="$r" -v n="$NCLI" -v dp="$dp" -v dq="$dq" -v gp="$gp" -v gq="$gq" \
            -v json="${JSON:-0}" 'BEGIN {
            if (json == 1)
                printf "{\"round\":%d,\"clients\":%d,\"direct_pull_mibs\":%s,\"gw_pull_mibs\":%s,\"direct_push_mibs\":%s,\"gw_push_mibs\":%s}\n", r, n, dp, gp, dq, gq
            else
                printf "%-6d %8d %14s %14s %14s %14s %10.2f %10.2f\n", r, n, dp, gp, dq, gq,
                    dp ? gp / dp : 0, dq ? gq / dq : 0 }'
    done
elif [ "$MODE" = overflow ]; then
    server tcp1 "ofi+tcp://127.0.0.1:0"
    server shm1 "shm://$TAG-s1"
    lat() { # TARGET OUTFILE
        timeout 300 "$PERF" client --target "$1" --test lat --sizes "$SIZES" \
            --iters "$LAT_ITERS" --reps "$REPS" --json >"$2" 2>"$2.err" ||
            { echo "client to $1 failed: $(cat "$2.err")" >&2; exit 1; }
    }
    [ "${JSON:-0}" = 1 ] || printf '%-6s %8s %12s %12s %10s %12s %12s\n' round size \
        direct_us gw_us ratio direct_p99 gw_p99
    for r in $(seq "$ROUNDS"); do
        lat "$tcp1" "$T/d.json"
        lat "$shm1@$GW" "$T/g.json"
        join <(fields "$T/d.json" | sort) <(fields "$T/g.json" | sort) | sort -n |
            awk -v r="$r" -v json="${JSON:-0}" '{
            if (json == 1)
                printf "{\"round\":%d,\"size\":%d,\"direct_us\":%s,\"gw_us\":%s,\"direct_p99_us\":%s,\"gw_p99_us\":%s}\n", r, $1, $2, $4, $3, $5
            else
                printf "%-6d %8d %12.2f %12.2f %10.2f %12.1f %12.1f\n", r, $1, $2, $4,
                    $2 ? $4 / $2 : 0, $3, $5 }'
    done
else
    echo "gw-ofi-shm: MODE multi or overflow, not '$MODE'" >&2
    exit 2
fi
