#!/bin/bash
# Lint of the test scripts (tests/README.md): mistakes that make a pass
# claim more than was checked.
#   1. a bare `sleep N` standing in for state: each sleep must say why it
#      is not one with a trailing `# sleep-ok: <reason>` (pacing a load
#      generator, the poll interval of a bounded wait, a window measured);
#   2. a SKIP printed and then `exit 0` (meson shows OK): a case that cannot
#      run exits 77, or is left out with skip_case (gw_lib.sh);
#   3. in tests/integration, any `exit 0` (a test passes by reaching its
#      end), unless marked `# exit-ok: <reason>`;
#   4. a wait_for whose outcome is thrown away (`wait_for ... || true`).
# First it checks itself on scripts with each mistake and one without.
#   lint_tests.sh [FILE...]   (default: tests/integration/*.sh, tests/bench/*.sh,
#                             tests/soak/*.sh)
set -u
here=$(cd "$(dirname "$0")" && pwd)

# lint FILE...: one "FILE:LINE: what" per finding; false if any.
lint() {
    awk '
    # The code of a line without its comment ("#" after a blank, outside
    # quotes); with BLANK, what is quoted is left out too.
    function code_of(l, blank,    i, c, q, out) {
        q = ""
        out = ""
        for (i = 1; i <= length(l); i++) {
            c = substr(l, i, 1)
            if (q == "" && c == "#" && (i == 1 || substr(l, i - 1, 1) ~ /[ \t]/))
                break
            if (q == "" && (c == "\"" || c == "\047"))
                q = c
            else if (c == q && (q == "\047" || substr(l, i - 1, 1) != "\\"))
                q = ""
            else if (blank && q != "")
                continue
            out = out c
        }
        return out
    }
    function report(what) {
        printf "%s:%d: %s\n", FILENAME, start, what
        bad = 1
    }
    FNR == 1 {
        stmt = ""
        skip_line = 0
        integ = FILENAME ~ /tests\/integration\/[^\/]*$/
    }
    {
        line = $0
        # A statement continues on the next line after "\", "||" or "&&".
        if (stmt == "")
            start = FNR
        stmt = stmt " " line
        if (line ~ /(\\|\|\||&&)[ \t]*$/)
            next
        s = stmt
        stmt = ""
        code = code_of(s, 1)
        if (code ~ /(^|[ \t;&|(`])sleep[ \t]+[^ \t]/ &&
            s !~ /#[ \t]*sleep-ok:[ \t]*[^ \t]/)
            report("sleep without \"# sleep-ok: <reason>\": wait for state instead")
        if (code_of(s, 0) ~ /(echo|printf).*SKIP/)
            skip_line = start
        if (code ~ /(^|[ \t;&|{])exit[ \t]+([1-9]|\$)/)
            skip_line = 0
        if (code ~ /(^|[ \t;&|{])exit[ \t]+0([ \t;}]|$)/) {
            if (skip_line && start - skip_line <= 3)
                report("SKIP then exit 0: exit 77, or skip_case (gw_lib.sh)")
            else if (integ && s !~ /#[ \t]*exit-ok:[ \t]*[^ \t]/)
                report("exit 0 in a test: a test passes by reaching its end")
        }
        if (code ~ /(^|[ \t;&|(])wait_for(_s)?[ \t]/ &&
            code ~ /\|\|[ \t]*(true|:)[ \t]*($|[;)])/)
            report("wait_for ... || true: the wait proves nothing")
    }
    END { exit bad }' "$@"
}

# Self-test: each mistake is found, a clean script passes.
t=$(mktemp -d /tmp/cw-lint.XXXXXX)
trap 'rm -rf "$t"' EXIT
mkdir -p "$t/tests/integration"
cat >"$t/tests/integration/bad.sh" <<'EOF'
start_thing &
sleep 0.3
x=1; sleep 1
if ! ns_make "$ns"; then
    echo "ok - # SKIP: no namespace"
    exit 0
fi
wait_for grep -q x "$T/log" ||
    true
[ -n "$y" ] || exit 0
EOF
cat >"$t/tests/integration/good.sh" <<'EOF'
sleep 0.2 # sleep-ok: pacing the reloads
# the gateway sleeps: few wake-ups
python3 -c 'import time; time.sleep(1)'
wait_for grep -q x "$T/log" || fail "no x"
echo "SKIP: no ucx here"; exit 77
exit 0 # exit-ok: the usage text was asked for
EOF
lint "$t/tests/integration/bad.sh" >"$t/bad.out"
want="2 3 6 8 10"
got=$(cut -d: -f2 "$t/bad.out" | tr '\n' ' ')
if [ "$got" != "$want " ]; then
    echo "not ok - the lint finds each mistake: lines $got, expected $want"
    cat "$t/bad.out"
    exit 1
fi
if ! lint "$t/tests/integration/good.sh" >"$t/good.out"; then
    echo "not ok - the lint passes a clean script:"
    cat "$t/good.out"
    exit 1
fi
echo "ok - the lint finds a bare sleep, SKIP then exit 0, exit 0, wait_for || true; passes annotated ones"

if [ $# = 0 ]; then
    for f in "$here"/*.sh "$here"/../bench/*.sh "$here"/../soak/*.sh; do
        [ "$f" -ef "$0" ] || set -- "$@" "$f"
    done
fi
if ! lint "$@"; then
    echo "not ok - test scripts: fix the lines above (tests/README.md)"
    exit 1
fi
echo "ok - $# test scripts: no bare sleep, no silent skip, no ignored wait"
