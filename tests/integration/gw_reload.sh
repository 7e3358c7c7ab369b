#!/bin/bash
# Reload under load: a valid file (SIGHUP) swaps the table (a new service
# appears) and an invalid one (cwctl reload) is refused with the old table
# kept; the load running meanwhile sees no failure.  Then reloads that add
# and drop a network.
. "$(dirname "$0")/gw_lib.sh"

start_echo echo "shm://$TAG-echo"
admin="127.0.0.1:$(free_port)"
write_cfg() {
    cat >"$T/gw.yaml.tmp" <<YAML
gateway: { name: rlgw, admin: "$admin" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:$port" }
  - { name: shm0, address: "shm://$TAG-gw" }
${2:-}
services:
  - { name: echo, backends: ["$echo"] }
$1
YAML
    mv "$T/gw.yaml.tmp" "$T/gw.yaml"
}
port=$(free_port)
write_cfg ""
start_gw gw "$T/gw.yaml"

timeout 60 "$CW_PING" -q -c 3000 -n 4 -t 5000 "$echo@$gw_tcp0" >"$T/load.out" &
load=$!
ping_expect "no svc:echo2 yet" CW_NO_ROUTE -c 1 "svc:echo2@$gw_tcp0"

write_cfg "  - { name: echo2, backends: [\"$echo\"] }"
kill -HUP "$gw_PID"
wait_for "$CW_PING" -q -c 1 "svc:echo2@$gw_tcp0" >/dev/null ||
    fail "svc:echo2 not served after SIGHUP"
pass "valid file reloaded by SIGHUP: svc:echo2 served"

printf 'routes:\n  - { dest: "shm://*", via: nosuchnet, priorty: 1 }\n' >>"$T/gw.yaml"
"$CWCTL" --admin "$admin" reload >"$T/reload.out" 2>&1 &&
    fail "invalid file accepted: $(cat "$T/reload.out")"
grep -q "old table kept" "$T/reload.out" || fail "reload error not reported: $(cat "$T/reload.out")"
pass "invalid file refused: $(head -c 200 "$T/reload.out")"
ping_expect "old table still in place" CW_OK -c 5 "svc:echo2@$gw_tcp0"
"$CWCTL" --admin "$admin" status --json | grep -q '"reloads":1,"reload_failures":1' ||
    fail "reload counters: $("$CWCTL" --admin "$admin" status --json)"
pass "status shows 1 reload and 1 failure"

wait "$load"
grep -q "3000 calls, CW_OK=3000;" "$T/load.out" || fail "load saw failures: $(cat "$T/load.out")"
pass "load during the reloads: $(cat "$T/load.out")"

# A reload that adds a network opens it; one that drops it stops using it.
uport=$(free_port)
write_cfg "" "  - { name: ucx0, address: \"ucx+tcp://127.0.0.1:$uport\" }"
"$CWCTL" --admin "$admin" reload >"$T/reload.out" 2>&1 || fail "reload adding ucx0: $(cat "$T/reload.out")"
"$CWCTL" --admin "$admin" status | grep -q "^ucx0 .*ucx+tcp://127.0.0.1:$uport" ||
    fail "ucx0 not listed: $("$CWCTL" --admin "$admin" status)"
ping_expect "through the network added by reload" CW_OK -c 5 "$echo@ucx+tcp://127.0.0.1:$uport"
write_cfg ""
"$CWCTL" --admin "$admin" reload >"$T/reload.out" 2>&1 || fail "reload dropping ucx0: $(cat "$T/reload.out")"
"$CWCTL" --admin "$admin" status | grep -q "^ucx0 .*(removed)" ||
    fail "ucx0 not marked removed: $("$CWCTL" --admin "$admin" status)"
ping_expect "the removed network carries no traffic" CW_UNREACHABLE -c 2 "$echo@ucx+tcp://127.0.0.1:$uport"
