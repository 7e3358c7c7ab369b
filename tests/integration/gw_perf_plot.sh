#!/bin/bash
# cw-perf --plot: a run drawn by gnuplot into a PNG (its magic bytes, a
# size a picture with axes and a curve has), and "cw-perf plot" drawing
# two runs' --json files side by side: direct and through a gateway.  A
# file that is not cw-perf's JSON, or missing, is refused with its name;
# --plot-from outside "cw-perf plot" is a usage error; and without gnuplot
# on PATH both say so and exit 1 (checked with PATH emptied, also where
# gnuplot exists).  Exits 77 only if gnuplot is not installed here (the
# drawing cases are left out; the others run).
. "$(dirname "$0")/gw_lib.sh"
CW_PERF=$CW_TOOLS/cw-perf

# is_png FILE: the PNG signature and more than 10 KiB (a chart, not an
# empty canvas).
is_png() {
    [ "$(head -c 8 "$1" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] &&
        [ "$(stat -c %s "$1")" -gt 10240 ]
}

rm -f "$T/perf.addr"
"$CW_PERF" server --listen "shm://$TAG-perf" --addr-file "$T/perf.addr" \
    >"$T/perf.out" 2>"$T/perf.log" &
perf_pid=$!
PIDS="$PIDS $perf_pid"
wait_for addr_ready "$T/perf.addr" "$perf_pid" || fail "cw-perf server did not start"
srv=$(cat "$T/perf.addr")
tcp_shm_gw gw "admin: \"127.0.0.1:$(free_port)\""

# Without gnuplot on PATH: said before anything runs, exit 1.
timeout 60 env PATH=/nonexistent "$CW_PERF" client --target "$srv" --test lat \
    --sizes 64 --iters 10 --reps 1 --plot "$T/none.png" >"$T/nognu.out" 2>"$T/nognu.err"
rc=$?
[ "$rc" = 1 ] && grep -q "needs gnuplot.*gnuplot-nox" "$T/nognu.err" && [ ! -e "$T/none.png" ] ||
    fail "client --plot without gnuplot: exit $rc, $(cat "$T/nognu.err")"
[ -s "$T/nognu.out" ] && fail "client --plot without gnuplot ran the benchmark: $(cat "$T/nognu.out")"
pass "client --plot without gnuplot on PATH: exit 1 before the run, '$(cat "$T/nognu.err")'"

runs() { # NAME TARGET: lat and bw runs of TARGET, their JSON lines in NAME.json
    timeout 120 "$CW_PERF" client --target "$2" --test lat --sizes 64,4K,64K \
        --iters 200 --reps 1 --json >"$T/$1.json" 2>"$T/$1.err" &&
        timeout 120 "$CW_PERF" client --target "$2" --test bw --sizes 64K,1M \
            --iters 8 --reps 1 --json >>"$T/$1.json" 2>>"$T/$1.err" ||
        fail "cw-perf $1 runs: $(cat "$T/$1.err")"
    python3 -c 'import json,sys; [json.loads(l) for l in open(sys.argv[1])]' "$T/$1.json" ||
        fail "$1.json is not JSON lines: $(head -c 300 "$T/$1.json")"
}
runs direct "$srv"
runs gateway "$srv@$gw_tcp0"
pass "lat and bw, direct and through the gateway: 2 JSON lines each"

timeout 60 env PATH=/nonexistent "$CW_PERF" plot --plot "$T/none.png" \
    --plot-from "$T/direct.json" >"$T/nognu.out" 2>"$T/nognu.err"
rc=$?
[ "$rc" = 1 ] && grep -q "needs gnuplot" "$T/nognu.err" ||
    fail "plot without gnuplot: exit $rc, $(cat "$T/nognu.err")"
pass "cw-perf plot without gnuplot on PATH: exit 1, '$(cat "$T/nognu.err")'"

printf '{"test":"lat","results":[{"size":64}]}\n' >"$T/bad.json"
timeout 30 "$CW_PERF" plot --plot "$T/bad.png" --plot-from "$T/direct.json" "$T/bad.json" \
    >"$T/bad.out" 2>"$T/bad.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "$T/bad.json:1: not a cw-perf --json result" "$T/bad.err" ||
    fail "a result without median: exit $rc, $(cat "$T/bad.err")"
timeout 30 "$CW_PERF" plot --plot "$T/bad.png" --plot-from "$T/missing.json" 2>"$T/bad.err"
rc=$?
[ "$rc" = 1 ] && grep -qF "$T/missing.json: No such file" "$T/bad.err" ||
    fail "a missing file: exit $rc, $(cat "$T/bad.err")"
timeout 30 "$CW_PERF" client --target "$srv" --test lat --plot-from "$T/direct.json" 2>"$T/bad.err"
rc=$?
[ "$rc" = 2 ] && grep -q "plot-from goes with 'cw-perf plot'" "$T/bad.err" ||
    fail "--plot-from with client: exit $rc, $(cat "$T/bad.err")"
pass "refused: a file not cw-perf's JSON (FILE:LINE), a missing file, --plot-from with client"

if ! command -v gnuplot >/dev/null; then
    skip_case "drawing" "gnuplot is not installed (apt-get install gnuplot-nox)"
else
    timeout 120 "$CW_PERF" client --target "$srv@$gw_tcp0" --test lat --sizes 64,4K,64K \
        --iters 200 --reps 1 --plot "$T/run.png" >"$T/run.out" 2>"$T/run.err" ||
        fail "client --plot: exit $? $(cat "$T/run.err")"
    is_png "$T/run.png" || fail "client --plot wrote no PNG: $(head -c 16 "$T/run.png" | od -c | head -2)"
    grep -q "plotted 3 results into $T/run.png" "$T/run.err" || fail "client --plot: $(cat "$T/run.err")"
    pass "client --plot: $T/run.png is a PNG of $(stat -c %s "$T/run.png") bytes, 3 results"

    timeout 60 "$CW_PERF" plot --plot "$T/cmp.png" --plot-from "$T/direct.json" "$T/gateway.json" \
        >"$T/cmp.out" 2>"$T/cmp.err" || fail "cw-perf plot: exit $? $(cat "$T/cmp.err")"
    is_png "$T/cmp.png" || fail "cw-perf plot wrote no PNG"
    # lat, bw pull and bw push from each file.
    grep -q "plotted 6 series from 2 files into $T/cmp.png" "$T/cmp.err" ||
        fail "cw-perf plot: $(cat "$T/cmp.err")"
    pass "direct vs through the gateway: $T/cmp.png, a PNG of $(stat -c %s "$T/cmp.png") bytes, 6 series"
fi

timeout 30 "$CW_PERF" quit --target "$srv" || fail "cw-perf quit"
wait "$perf_pid" || fail "cw-perf server exited $?: $(tail -n 5 "$T/perf.log")"
pass "cw-perf server exited 0"
gw_stop_clean gw
