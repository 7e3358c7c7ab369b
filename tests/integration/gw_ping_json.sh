#!/bin/bash
# cw-ping --json: one JSON object per address called, on a line of its
# own (python3 json.loads each): direct and through a gateway at once (two
# objects), the counts per status, rtt min <= avg <= max, duplicate, ok;
# calls that fail as --expect says (ok true) and as it does not (ok false,
# exit 1); per-call lines are not printed; --json with --serve is refused.
. "$(dirname "$0")/gw_lib.sh"

start_echo echo "shm://$TAG-echo"
tcp_shm_gw gw "admin: \"127.0.0.1:$(free_port)\""

# check_json OUT PYTHON-CONDITION WHAT: every line of OUT is a JSON object;
# the condition holds of the list of them, "s".
check_json() {
    python3 - "$1" "$2" <<'PY' || fail "$3: $(head -c 600 "$1")"
import json, sys
lines = open(sys.argv[1]).read().splitlines()
s = [json.loads(l) for l in lines]
assert all(isinstance(x, dict) for x in s), "not one object per line"
assert eval("(" + sys.argv[2] + ")"), "condition false: " + sys.argv[2]
PY
    pass "$3"
}

timeout 60 "$CW_PING" --json -c 6 -n 2 -s 0,64,4K "$echo" "$echo@$gw_tcp0" \
    >"$T/both.json" 2>"$T/both.err" || fail "cw-ping --json: exit $? $(cat "$T/both.err")"
check_json "$T/both.json" '
len(s) == 2 and all(x["calls"] == 6 and x["statuses"] == {"CW_OK": 6} and x["ok"] is True and
    x["duplicate"] == 0 and x["bad_data"] == 0 and x["expect"] == "CW_OK" and
    x["sizes"] == [0, 64, 4096] and x["rtt_us"]["n"] == 6 and
    0 < x["rtt_us"]["min"] <= x["rtt_us"]["avg"] <= x["rtt_us"]["max"]
    for x in s)' "direct and through the gateway: two objects, 6 calls CW_OK each, rtt min <= avg <= max"
check_json "$T/both.json" "[x['target'] for x in s] == ['$echo', '$echo@$gw_tcp0']" \
    "each object names its address ($echo, $echo@$gw_tcp0)"

# A target the gateway cannot reach: CW_UNREACHABLE or the like, counted.
timeout 60 "$CW_PING" --json -c 3 -t 2000 "shm://$TAG-nobody@$gw_tcp0" \
    >"$T/fail.json" 2>"$T/fail.err"
rc=$?
[ "$rc" = 1 ] || fail "calls to nobody: exit $rc, expected 1"
check_json "$T/fail.json" '
len(s) == 1 and s[0]["ok"] is False and s[0]["calls"] == 3 and
"CW_OK" not in s[0]["statuses"] and sum(s[0]["statuses"].values()) == 3 and
s[0]["rtt_us"] is None' "calls that fail: ok false, exit 1, their statuses counted, rtt null"
st=$(python3 -c 'import json,sys; print(list(json.load(open(sys.argv[1]))["statuses"])[0])' "$T/fail.json")
timeout 60 "$CW_PING" --json --expect "$st" -c 3 -t 2000 "shm://$TAG-nobody@$gw_tcp0" \
    >"$T/expect.json" 2>"$T/expect.err" || fail "--expect $st: exit $? $(cat "$T/expect.json")"
check_json "$T/expect.json" "s[0]['ok'] is True and s[0]['expect'] == '$st' and s[0]['statuses'] == {'$st': 3}" \
    "--expect $st: ok true, exit 0"

timeout 10 "$CW_PING" --json --serve "shm://$TAG-x" >"$T/serve.out" 2>"$T/serve.err"
rc=$?
[ "$rc" = 2 ] && grep -q -- "--json is for the client" "$T/serve.err" ||
    fail "--json --serve: exit $rc, $(cat "$T/serve.err")"
pass "--json with --serve is refused (exit 2)"
gw_stop_clean gw
