#!/bin/sh
# cw-ping and cw-perf refuse malformed numbers on their command lines with
# exit status 2 and a message naming the option (a "-c -5" used to become
# four billion calls), and take the well-formed ones (TAP).
# usage: test_tools_args.sh CW_PING CW_PERF
PING=$1
PERF=$2
TMP=$(mktemp -d /tmp/cw-tools-args.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
n=0
fails=0
echo "1..19"

# expect NAME RC PATTERN CMD...: exit status RC and PATTERN on stderr.
expect() {
    name=$1 want=$2 pat=$3
    shift 3
    timeout 20 "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    n=$((n + 1))
    if [ "$rc" = "$want" ] && grep -q -e "$pat" "$TMP/err"; then
        echo "ok $n - $name"
    else
        echo "not ok $n - $name (rc $rc, expected $want; stderr: $(head -c 200 "$TMP/err"))"
        fails=$((fails + 1))
    fi
}

NOWHERE=shm://cw-tools-args-nobody-$$
expect "cw-ping -c -5" 2 "-c: expected a number, got '-5'" "$PING" -c -5 "$NOWHERE"
expect "cw-ping -c 5x" 2 "-c: expected a number, got '5x'" "$PING" -c 5x "$NOWHERE"
expect "cw-ping -n ''" 2 "-n: expected a number" "$PING" -n "" "$NOWHERE"
expect "cw-ping -t beyond 32 bits" 2 "-t: expected a number" "$PING" -t 99999999999 "$NOWHERE"
expect "cw-ping --cancel-after 1e3" 2 "--cancel-after: expected a number" "$PING" --cancel-after 1e3 "$NOWHERE"
expect "cw-ping -s 1Q" 2 "bad size list '1Q'" "$PING" -s 1Q "$NOWHERE"
expect "cw-ping -s beyond 64 MiB" 2 "bad size list" "$PING" -s 65M "$NOWHERE"
# Well-formed: past the parsing, the call fails to reach nobody (exit 1).
expect "cw-ping -c 2 -n 2 -t 500 -s 0,4K,1MiB" 1 "unreachable" "$PING" -c 2 -n 2 -t 500 -s 0,4K,1MiB "$NOWHERE"
expect "cw-perf --iters -1" 2 "--iters: expected a number, got '-1'" "$PERF" client --target "$NOWHERE" --test lat --iters -1
expect "cw-perf --inflight 16x" 2 "--inflight: expected a number" "$PERF" client --target "$NOWHERE" --test rate --inflight 16x
expect "cw-perf --sizes 4KiB,-3" 2 'bad --sizes "4KiB,-3"' "$PERF" client --target "$NOWHERE" --test lat --sizes 4KiB,-3
expect "cw-perf well-formed options" 1 "." "$PERF" client --target "$NOWHERE" --test lat --sizes 0,4KiB,1M --iters 10 --reps 1 --inflight 2
# Issue 33's options: --time, --csv, --reply-size, and CW_PERF_CORRUPT
# (tests only); the run's shape is refused before anything is sent.
expect "cw-perf --time 0" 2 "--time: expected seconds" "$PERF" client --target "$NOWHERE" --test lat --time 0
expect "cw-perf --time and --iters" 2 "--iters or --time, not both" "$PERF" client --target "$NOWHERE" --test lat --time 1.5 --iters 10
expect "cw-perf --json and --csv" 2 "--json or --csv, not both" "$PERF" client --target "$NOWHERE" --test rate --json --csv
expect "cw-perf --reply-size with bw" 2 "--reply-size is for lat and rate" "$PERF" client --target "$NOWHERE" --test bw --reply-size 4K
expect "cw-perf --reply-size beyond 1 GiB" 2 "--reply-size: expected a size up to 1G" "$PERF" client --target "$NOWHERE" --test lat --reply-size 2G
expect "cw-perf CW_PERF_CORRUPT=x" 2 "CW_PERF_CORRUPT: expected a number" env CW_PERF_CORRUPT=x "$PERF" client --target "$NOWHERE" --test lat
expect "cw-perf well-formed issue 33 options" 1 "." "$PERF" client --target "$NOWHERE" --test rate --verify --reply-size 4K --time 0.2 --csv --reps 1
[ "$fails" = 0 ]
