#!/bin/bash
# Per-request cost of causewayd with few and with many distinct
# destinations (docs/perf/2026-11-28-hostile-keys.md): instructions per
# forwarded request counted by callgrind in the gateway.
#
#   tests/bench/gw-keys-bench.sh [BUILD_DIR] [CALLS] [FLOOD]
#       BUILD_DIR default build-rel (a release tree); CALLS 20000 (the
#       10-key phases); FLOOD 100000 (distinct destinations)
#   CAUSEWAYD=PATH measures another gateway binary (e.g. an older build)
#   with the same client.
#
# Each destination is one the gateway has no route to: it parses it, caches
# the parsed form (limits.max_cached_dests, default 16384: past that the
# least recently used go), asks the route table and answers CW_NO_ROUTE.
# (Not shm names nobody listens on: na-shm keeps a record of each name it
# was asked for, in a list, so that case would measure the plugin.)
#
# Cases, each in a fresh gateway under callgrind; a measured phase starts
# after `callgrind_control -z` and ends with `callgrind_control -d`, so that
# start-up, warm-up and shut-down are not counted:
#   few        1000 warm-up calls, then CALLS calls over 10 destinations
#   distinct   1000 warm-up calls, then FLOOD calls, each to a new one
#   distinct/10  the same with FLOOD/10 calls (is a miss flat in the number
#              of keys seen?)
#   few-after  FLOOD calls to new destinations, then CALLS calls over 10
#              (is the hot path flat with the tables full of hostile keys?)
# Prints Ir per request for each and the ratios to "few".
set -u
BUILD=${1:-build-rel}
CALLS=${2:-20000}
FLOOD=${3:-100000}
GW=${CAUSEWAYD:-$BUILD/gateway/causewayd}
CLI=$BUILD/tests/bench/gw-keys-bench
for f in "$GW" "$CLI"; do
    [ -x "$f" ] || { echo "missing $f (build $BUILD first)" >&2; exit 2; }
done
for p in valgrind callgrind_control; do
    command -v $p >/dev/null || { echo "$p not found" >&2; exit 2; }
done
export CAUSEWAY_PLUGIN_PATH=$BUILD/na-shm
T=$(mktemp -d /tmp/cw-keysbench.XXXXXX) || exit 1
GW_PID=
cleanup() {
    [ -n "$GW_PID" ] && kill -KILL "$GW_PID" 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

# measure WARM_CALLS WARM_KEYS CALLS KEYS: prints the gateway's Ir per
# request over the CALLS calls to KEYS destinations made after WARM_CALLS
# calls to WARM_KEYS.
measure() {
    local gwaddr ir i
    cat >"$T/gw.yaml" <<YAML
gateway: { name: keysbench, admin: "127.0.0.1:0" }
networks:
  - { name: shm0, address: "shm://cwkb-$$-gw" }
health: { enabled: false }
YAML
    rm -f "$T/ready" "$T"/cg.out*
    valgrind --tool=callgrind --callgrind-out-file="$T/cg.out" \
        "$GW" -c "$T/gw.yaml" --ready-fd 3 3>"$T/ready" 2>"$T/gw.log" &
    GW_PID=$!
    for i in $(seq 600); do
        grep -qs '^ready$' "$T/ready" && break
        kill -0 "$GW_PID" 2>/dev/null || break
        sleep 0.1 # sleep-ok: poll step of a bounded wait for "ready"
    done
    grep -qs '^ready$' "$T/ready" || { echo "gateway did not start" >&2; exit 1; }
    gwaddr=$(awk '$1 == "shm0" { print $2 }' "$T/ready")
    "$CLI" "$gwaddr" "$1" "$2" >"$T/cli.out" ||
        { echo "client failed: $(cat "$T/cli.out")" >&2; exit 1; }
    callgrind_control -z "$GW_PID" >/dev/null 2>&1
    "$CLI" "$gwaddr" "$3" "$4" >"$T/cli.out" ||
        { echo "client failed: $(cat "$T/cli.out")" >&2; exit 1; }
    callgrind_control -d "$GW_PID" >/dev/null 2>&1
    kill -TERM "$GW_PID"
    wait "$GW_PID"
    GW_PID=
    ir=$(awk '/^summary:/ { print $2; exit }' "$T/cg.out.1")
    [ -n "$ir" ] || { echo "no callgrind dump" >&2; exit 1; }
    echo $((ir / $3))
}

few=$(measure 1000 10 "$CALLS" 10) || exit 1
many=$(measure 1000 10 "$FLOOD" "$FLOOD") || exit 1
tenth=$(measure 1000 10 $((FLOOD / 10)) $((FLOOD / 10))) || exit 1
after=$(measure "$FLOOD" "$FLOOD" "$CALLS" 10) || exit 1
ratio() { awk -v a="$1" -v b="$few" 'BEGIN { printf "%.3f", a / b }'; }
printf '%-12s %8s %10s %12s %8s\n' case calls keys "Ir/request" "x few"
printf '%-12s %8s %10s %12s %8s\n' few "$CALLS" 10 "$few" 1.000
printf '%-12s %8s %10s %12s %8s\n' distinct "$FLOOD" "$FLOOD" "$many" "$(ratio "$many")"
printf '%-12s %8s %10s %12s %8s\n' distinct/10 $((FLOOD / 10)) $((FLOOD / 10)) "$tenth" "$(ratio "$tenth")"
printf '%-12s %8s %10s %12s %8s\n' few-after "$CALLS" 10 "$after" "$(ratio "$after")"
