#!/bin/bash
# A libFuzzer campaign of one target from the committed seed corpus
# (docs/reliability.md, "Fuzzing by the million").
#   campaign.sh BUILD_FUZZ TARGET [RUNS] [WORKDIR]
# TARGET: wire, live, addr or config; RUNS: executions (10000000).
# BUILD_FUZZ is a clang tree set up as README.md "Fuzzing" says.  New
# inputs go to WORKDIR/TARGET (default /tmp/cw-fuzz), which starts as a
# copy of tests/fuzz/corpus/<seeds>; the committed corpus is only read.
# Runs under nice -n 19, one job.  A crash leaves its input in WORKDIR
# (crash-*, leak-*, oom-*, timeout-*) and fails the campaign; make it a
# seed in tests/fuzz/corpus/<seeds>/ once fixed, so that the bounded
# fuzz-* tests of meson replay it.  Prints libFuzzer's last status lines
# and its final statistics.
set -u
BUILD=$1
TARGET=$2
RUNS=${3:-10000000}
WORK=${4:-/tmp/cw-fuzz}
SRC=$(cd "$(dirname "$0")/../.." && pwd)
case $TARGET in
wire | live) seeds=$SRC/tests/fuzz/corpus/wire ;;
addr) seeds=$SRC/tests/fuzz/corpus/addr ;;
config) seeds="$SRC/tests/fuzz/corpus/config $SRC/tests/config-cases" ;;
*)
    echo "campaign.sh: TARGET is wire, live, addr or config" >&2
    exit 2
    ;;
esac
exe=$BUILD/tests/fuzz/fuzz_${TARGET}_libfuzzer
[ -x "$exe" ] || {
    echo "campaign.sh: no $exe (README.md, \"Fuzzing\")" >&2
    exit 2
}
mkdir -p "$WORK/$TARGET" "$WORK/artifacts-$TARGET"
export CAUSEWAY_PLUGIN_PATH=$BUILD/na-shm
# The live target's context and raw endpoint use na-shm names of their own.
log=$WORK/$TARGET.log
echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) $TARGET: $RUNS runs, $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  nice -n 19 $exe -runs=$RUNS -print_final_stats=1 -artifact_prefix=$WORK/artifacts-$TARGET/ $WORK/$TARGET $seeds"
t0=$(date +%s)
# shellcheck disable=SC2086
nice -n 19 "$exe" -runs="$RUNS" -print_final_stats=1 \
    -artifact_prefix="$WORK/artifacts-$TARGET/" "$WORK/$TARGET" $seeds >"$log" 2>&1
rc=$?
t1=$(date +%s)
grep -E "INITED|pulse|REDUCE|NEW" "$log" | tail -n 2
grep -E "^Done|^stat::|ERROR|SUMMARY" "$log"
echo "  $TARGET: exit $rc after $((t1 - t0)) s; corpus $(find "$WORK/$TARGET" -type f | wc -l) files; artifacts: $(ls "$WORK/artifacts-$TARGET" | wc -l)"
exit $rc
