#!/bin/sh
# causewayd --check / --dump / --explain / multi-file check (TAP).
# usage: test_cli_config.sh CAUSEWAYD CASES_DIR
CWD="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
CASES="$2"
TMP=$(mktemp -d /tmp/cw-cli-config.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
n=0
fails=0
echo "1..27"

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

# Several files after one -c (issue 29): each checked, each error named by
# its file, the good ones still reported.
"$CWD" --check -c "$CASES/multi/ok-two-gateways/a.yaml" "$CASES/multi/ok-two-gateways/b.yaml" >"$TMP/out" 2>"$TMP/err"
check "--check -c A B: several files after one -c" 0 $? "$(has 'checked together' "$TMP/out")"

(cd "$CASES" && "$CWD" --check -c good/minimal.yaml bad/via-fabric.yaml bad/tab-indent.yaml) >"$TMP/out" 2>"$TMP/err"
rc=$?
ok=1
grep -q '^good/minimal.yaml: ok' "$TMP/out" &&
    grep -q '^bad/via-fabric.yaml:8:41: routes\[0\].via' "$TMP/err" &&
    grep -q '^bad/tab-indent.yaml:2:1: tabs are not allowed' "$TMP/err" &&
    grep -q '2 of 3 file(s) invalid' "$TMP/err" && ok=0
check "--check -c GOOD BAD BAD: each error named by its file" 2 $rc $ok

"$CWD" -c "$CASES/good/minimal.yaml" "$CASES/good/minimal.yaml" >"$TMP/out" 2>"$TMP/err"
check "run mode with two files says --check takes several" 2 $? "$(has 'several files are for --check' "$TMP/err")"

# --check catches what breaks a start: plugins, protocols, address syntax,
# a via network of another fabric (each at file:line:column).
(cd "$CASES/bad" && "$CWD" --check -c plugin-addresses.yaml) >"$TMP/out" 2>"$TMP/err"
rc=$?
check "--check: unknown plugin tcp://" 2 $rc "$(has "plugin-addresses.yaml:3:27: networks\[0\].address: unknown plugin 'tcp'" "$TMP/err")"
check "--check: Mercury's na+sm://" 2 $rc "$(has "plugin-addresses.yaml:4:27: .*unknown plugin 'na'" "$TMP/err")"
(cd "$CASES/bad" && "$CWD" --check -c via-fabric.yaml) >"$TMP/out" 2>"$TMP/err"
check "--check: a verbs dest via an ofi+tcp network" 2 $? "$(has "via-fabric.yaml:8:41: routes\[0\].via: network 'eth0' is ofi+tcp://" "$TMP/err")"

# --probe opens each network's plugin and protocol, on port 0.
printf '%s\n' 'networks:' \
    '  - { name: eth0, address: "ofi+tcp://127.0.0.1:7000" }' \
    '  - { name: shm0, address: "shm://probe-ok" }' >"$TMP/probe-ok.yaml"
"$CWD" --check --probe -c "$TMP/probe-ok.yaml" >"$TMP/out" 2>"$TMP/err"
rc=$?
ok=1
grep -q 'network eth0: .* opens (probed as ofi+tcp://127.0.0.1:0)' "$TMP/out" &&
    grep -q 'network shm0: .* opens (probed as shm://)' "$TMP/out" && ok=0
check "--check --probe: networks that open" 0 $rc $ok

# 192.0.2.1 is TEST-NET-1 (RFC 5737): never an address of this host.
printf '%s\n' 'networks:' \
    '  - { name: eth0, address: "ofi+tcp://127.0.0.1:7000" }' \
    '  - { name: far,  address: "ofi+tcp://192.0.2.1:7000" }' >"$TMP/probe-bad.yaml"
"$CWD" --check --probe -c "$TMP/probe-bad.yaml" >"$TMP/out" 2>"$TMP/err"
check "--check --probe: an address not on this host" 2 $? "$(has "probe-bad.yaml:3:5: networks\[1\].address: 'ofi+tcp://192.0.2.1:7000' would not open here" "$TMP/err")"

"$CWD" --check -c "$TMP/probe-bad.yaml" >"$TMP/out" 2>"$TMP/err"
check "--check without --probe opens nothing" 0 $? "$(has ': ok' "$TMP/out")"

"$CWD" --probe -c "$TMP/probe-ok.yaml" >"$TMP/out" 2>"$TMP/err"
check "--probe without --check is a usage error" 2 $? "$(has 'goes with --check' "$TMP/err")"

"$CWD" --check --probe --client -c "$CASES/good/client-routes.yaml" >"$TMP/out" 2>"$TMP/err"
check "--probe --client is a usage error" 2 $? "$(has 'no networks' "$TMP/err")"

[ $fails -eq 0 ]
