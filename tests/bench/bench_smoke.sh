#!/bin/bash
# bench-smoke: the benchmark scripts still run end to end (a few hundred
# RPCs each, no figure checked): gw-bench.sh over shm and raw TCP through
# the minimal relay in two alternating rounds (ROUNDS=2), and over ofi+tcp
# with coalescing endpoints (COALESCE=1, cw-perf --coalesce) where na-ofi
# is built, each row complete (no "n/a").
#   tests/bench/bench_smoke.sh BUILD_DIR
set -u
B=${1:?build dir}
out=$(ROUNDS=2 ITERS=300 REPS=1 MODES=blocking timeout 120 bash "$(dirname "$0")/gw-bench.sh" "$B" shm tcp 2>&1)
rc=$?
echo "$out"
[ $rc -eq 0 ] || { echo "not ok: gw-bench.sh exited $rc"; exit 1; }
for fab in shm tcp-raw; do
    row=$(echo "$out" | awk -v f="$fab" '$1 == f && $2 == "blocking"' | head -n 1)
    if [ -z "$row" ] || echo "$row" | grep -q 'n/a'; then
        echo "not ok: no complete $fab row"
        exit 1
    fi
done
cpu=$(echo "$out" | awk '$1 == "tcp-raw" && NF == 4' | tail -n 1)
echo "$cpu" | grep -Eq '^tcp-raw +blocking +[0-9.]+/[0-9.]+ +[0-9.]+/[0-9.]+/[0-9.]+$' ||
    { echo "not ok: no CPU line for tcp-raw"; exit 1; }
if [ -f "$B/na-ofi/cw-na-ofi.so" ]; then
    out=$(COALESCE=1 ITERS=300 REPS=1 MODES=blocking timeout 120 \
        bash "$(dirname "$0")/gw-bench.sh" "$B" ofi+tcp 2>&1)
    echo "$out"
    row=$(echo "$out" | awk '$1 == "ofi+tcp" && $2 == "blocking"' | head -n 1)
    if [ -z "$row" ] || echo "$row" | grep -q 'n/a'; then
        echo "not ok: no complete ofi+tcp row with COALESCE=1"
        exit 1
    fi
fi
echo "ok: gw-bench.sh rows complete"
