#!/bin/sh
# causewayd --check / --dump / --explain / multi-file check (TAP).
# usage: test_cli_config.sh CAUSEWAYD CASES_DIR
CWD="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
CASES="$2"
TMP=$(mktemp -d /tmp/cw-cli-config.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
n=0
fails=0
echo "1..16"

check() { # name, expected rc, actual rc, extra condition (0/1)
    n=$((n + 1))
    if [ "$2" = "$3" ] && [ "$4" = 0 ]; then
        echo "ok $n - $1"
    else
        echo "not ok $n - $1 (rc $3, expected $2)"
        fails=$((fails + 1))
    fi
}

has() { grep -q -e "$1" "$2" && echo 0 || echo 1; }

"$CWD" --check -c "$CASES/good/issue-example.yaml" >"$TMP/out" 2>"$TMP/err"
check "--check good file" 0 $? "$(has ': ok' "$TMP/out")"

(cd "$CASES/bad" && "$CWD" --check -c many-errors.yaml) >"$TMP/out" 2>"$TMP/err"
rc=$?
grep -v '^causewayd:' "$TMP/err" >"$TMP/err2"
cmp -s "$TMP/err2" "$CASES/bad/many-errors.err"
check "--check bad file: exit 2 and every error" 2 $rc $?

"$CWD" --check -c "$CASES/good/minimal.yaml" -c /nonexistent.yaml >"$TMP/out" 2>"$TMP/err"
check "--check a missing file" 2 $? "$(has 'cannot open' "$TMP/err")"

"$CWD" --dump -c "$CASES/good/issue-example.yaml" >"$TMP/dump.yaml" 2>"$TMP/err"
check "--dump" 0 $? "$(has 'max_timeout: 5m' "$TMP/dump.yaml")"

"$CWD" --dump -c "$TMP/dump.yaml" >"$TMP/dump2.yaml" 2>"$TMP/err"
rc=$?
tail -n +2 "$TMP/dump.yaml" >"$TMP/a"
tail -n +2 "$TMP/dump2.yaml" >"$TMP/b"
cmp -s "$TMP/a" "$TMP/b"
check "--dump output loads back to the same dump" 0 $rc $?

"$CWD" --explain ucx+tcp://10.2.7.7:7000 -c "$CASES/good/issue-example.yaml" >"$TMP/out" 2>"$TMP/err"
check "--explain: direct route" 0 $? "$(has 'via ib0 (deliver directly)' "$TMP/out")"

"$CWD" --explain ofi+cxi://42 -c "$CASES/good/issue-example.yaml" >"$TMP/out" 2>"$TMP/err"
check "--explain: next-hop gateway" 0 $? "$(has 'gateway ofi+tcp://10.1.0.2:7000 dev eth0' "$TMP/out")"

"$CWD" --explain shm://nowhere -c "$CASES/good/issue-example.yaml" >"$TMP/out" 2>"$TMP/err"
check "--explain: no route exits 1" 1 $? "$(has 'no route' "$TMP/out")"

"$CWD" --explain 'not an address' -c "$CASES/good/issue-example.yaml" >"$TMP/out" 2>"$TMP/err"
check "--explain: bad address exits 2" 2 $? 0

"$CWD" --check -c "$CASES/multi/ok-two-gateways/a.yaml" -c "$CASES/multi/ok-two-gateways/b.yaml" >"$TMP/out" 2>"$TMP/err"
check "--check several gateways: consistent" 0 $? "$(has 'checked together' "$TMP/out")"

(cd "$CASES/multi/loop" && "$CWD" --check -c a.yaml -c b.yaml) >"$TMP/out" 2>"$TMP/err"
check "--check several gateways: loop" 2 $? "$(has 'a.yaml:7: routing loop' "$TMP/err")"

(cd "$CASES/multi/missing-return" && "$CWD" --check -c a.yaml -c b.yaml) >"$TMP/out" 2>"$TMP/err"
check "--check several gateways: missing return route" 2 $? "$(has 'missing return route' "$TMP/err")"

"$CWD" --client --explain ucx+tcp://10.2.3.4:1 -c "$CASES/good/client-routes.yaml" >"$TMP/out" 2>"$TMP/err"
check "--client --explain" 0 $? "$(has 'gateway ofi+tcp://10.1.0.1:7000' "$TMP/out")"

"$CWD" --check >"$TMP/out" 2>"$TMP/err"
check "no -c is a usage error" 2 $? "$(has 'give -c FILE' "$TMP/err")"

"$CWD" --bogus >"$TMP/out" 2>"$TMP/err"
check "unknown option is a usage error" 2 $? 0

"$CWD" --help >"$TMP/out" 2>"$TMP/err"
check "--help" 0 $? "$(has '--explain ADDR' "$TMP/out")"

[ $fails -eq 0 ]
