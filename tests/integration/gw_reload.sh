#!/bin/bash
# Reload under load: a valid file (SIGHUP) swaps the table (a new service
# appears) and an invalid one (cwctl reload) is refused with the old table
# kept; the load running meanwhile sees no failure.  Then reloads that add
# and drop a network: RPCs in flight on the dropped one finish, then it is
# closed (port released, gone from cwctl status) while the others serve.
. "$(dirname "$0")/gw_lib.sh"

start_echo echo "shm://$TAG-echo"
# 2 s a call: the RPCs through ucx0 below stay in flight long enough to be
# seen there (at 300 ms, a loaded machine's polls missed all eight).
start_echo slow "shm://$TAG-slow" 2000
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
    gw_cfg_threads "$T/gw.yaml.tmp"
    mv "$T/gw.yaml.tmp" "$T/gw.yaml"
}
port=$(free_port)
write_cfg ""
start_gw gw "$T/gw.yaml"

# The load: 6000 calls, a new one every 2 ms at most (so that it lasts 12 s
# at least, over both reloads and the checks between them, which took
# more than 4 s on a loaded machine), in on shm0, whose rx counter is thus
# the load's alone (the checks come in on tcp0).
timeout 90 "$CW_PING" -q -c 6000 -n 4 -i 2 -t 5000 "$echo@$gw_shm0" >"$T/load.out" &
load=$!
load_rx=0
# load_moved: the load is alive and shm0 has received since the last look.
load_moved() {
    local rx
    kill -0 "$load" 2>/dev/null || return 1
    rx=$("$CWCTL" --admin "$admin" status --json | grep -o '"name":"shm0",[^}]*' |
        grep -o '"rx":[0-9]*' | cut -d: -f2)
    [ "${rx:-0}" -gt "$load_rx" ] || return 1
    load_rx=$rx
}
load_running() { # WHEN
    wait_for load_moved ||
        fail "the load is not running $1: $(cat "$T/load.out")"
    pass "the load is running $1 ($load_rx calls in on shm0 so far)"
}
load_running "before the reloads"
ping_expect "no svc:echo2 yet" CW_NO_ROUTE -c 1 "svc:echo2@$gw_tcp0"

write_cfg "  - { name: echo2, backends: [\"$echo\"] }"
kill -HUP "$gw_PID"
wait_for "$CW_PING" -q -c 1 "svc:echo2@$gw_tcp0" >/dev/null ||
    fail "svc:echo2 not served after SIGHUP"
pass "valid file reloaded by SIGHUP: svc:echo2 served"
load_running "after the SIGHUP reload"

printf 'routes:\n  - { dest: "shm://*", via: nosuchnet, priorty: 1 }\n' >>"$T/gw.yaml"
"$CWCTL" --admin "$admin" reload >"$T/reload.out" 2>&1 &&
    fail "invalid file accepted: $(cat "$T/reload.out")"
grep -q "old table kept" "$T/reload.out" || fail "reload error not reported: $(cat "$T/reload.out")"
pass "invalid file refused: $(head -c 200 "$T/reload.out")"
ping_expect "old table still in place" CW_OK -c 5 "svc:echo2@$gw_tcp0"
"$CWCTL" --admin "$admin" status --json | grep -q '"reloads":1,"reload_failures":1' ||
    fail "reload counters: $("$CWCTL" --admin "$admin" status --json)"
pass "status shows 1 reload and 1 failure"
load_running "after the refused reload"

wait "$load"
grep -q "6000 calls, CW_OK=6000;" "$T/load.out" || fail "load saw failures: $(cat "$T/load.out")"
pass "load during the reloads: $(cat "$T/load.out")"

# A reload that adds a network opens it; one that drops it stops using it.
uport=$(free_port)
write_cfg "" "  - { name: ucx0, address: \"ucx+tcp://127.0.0.1:$uport\" }"
"$CWCTL" --admin "$admin" reload >"$T/reload.out" 2>&1 || fail "reload adding ucx0: $(cat "$T/reload.out")"
"$CWCTL" --admin "$admin" status | grep -q "^ucx0 .*ucx+tcp://127.0.0.1:$uport" ||
    fail "ucx0 not listed: $("$CWCTL" --admin "$admin" status)"
ping_expect "through the network added by reload" CW_OK -c 5 "$echo@ucx+tcp://127.0.0.1:$uport"
# Slow RPCs (2 s each at the backend) in flight through ucx0 while a
# reload drops it: they finish normally, then ucx0 is closed.
timeout 60 "$CW_PING" -q -c 8 -n 8 -t 10000 "$slow@ucx+tcp://127.0.0.1:$uport" \
    >"$T/slow.out" 2>"$T/slow.err" &
slowload=$!
wait_for sh -c "'$CWCTL' --admin '$admin' status --json | grep -q '\"name\":\"ucx0\",[^}]*\"inflight\":[1-9]'" ||
    fail "no RPC in flight through ucx0: $("$CWCTL" --admin "$admin" status)"
write_cfg ""
"$CWCTL" --admin "$admin" reload >"$T/reload.out" 2>&1 || fail "reload dropping ucx0: $(cat "$T/reload.out")"
wait "$slowload" || fail "RPCs in flight on the dropped network: $(cat "$T/slow.out" "$T/slow.err")"
grep -q "8 calls, CW_OK=8;" "$T/slow.out" || fail "in-flight RPCs on ucx0: $(cat "$T/slow.out")"
pass "RPCs in flight on the dropped network finished: $(cat "$T/slow.out")"
wait_for sh -c "! '$CWCTL' --admin '$admin' status | grep -q '^ucx0 '" ||
    fail "ucx0 still listed: $("$CWCTL" --admin "$admin" status)"
pass "ucx0 no longer listed by cwctl status"
grep -q "ucx0 .*closing it" "$T/gw.log" || fail "gateway did not log closing ucx0"
if (exec 3<>"/dev/tcp/127.0.0.1/$uport") 2>/dev/null; then
    fail "port $uport of the dropped network still accepts connections"
fi
pass "port $uport of the dropped network is closed"
timeout 30 "$CW_PING" -q -c 1 -t 2000 "$echo@ucx+tcp://127.0.0.1:$uport" >"$T/ping.out" 2>&1 &&
    fail "a call through the dropped network succeeded: $(cat "$T/ping.out")"
pass "a call through the dropped network fails: $(tail -n 1 "$T/ping.out")"
ping_expect "tcp0 still serves" CW_OK -c 20 "$echo@$gw_tcp0"
ping_expect "shm0 still serves" CW_OK -c 20 "$echo@$gw_shm0"
ping_expect "services still served" CW_OK -c 5 "svc:echo@$gw_tcp0"
# Added back (on a new port: the old one may linger in TIME_WAIT), it
# takes the freed slot and serves.
uport2=$(free_port)
write_cfg "" "  - { name: ucx0, address: \"ucx+tcp://127.0.0.1:$uport2\" }"
"$CWCTL" --admin "$admin" reload >"$T/reload.out" 2>&1 || fail "reload re-adding ucx0: $(cat "$T/reload.out")"
ping_expect "ucx0 added back" CW_OK -c 5 "$echo@ucx+tcp://127.0.0.1:$uport2"
stop_pid "$gw_PID"
[ "$STOP_RC" = 0 ] || fail "gateway exit status $STOP_RC"
grep -q "ERROR: AddressSanitizer\|ERROR: LeakSanitizer\|runtime error" "$T/gw.log" &&
    fail "sanitizer report in the gateway log"
pass "gateway stopped cleanly"

# A request waiting in the admission queue when a reload drops the network
# it came in on is answered CW_UNREACHABLE on that network, like the
# requests that arrive on it after the reload, before the network is
# closed.  The route to $slow3 (8 s) is capped at 1 and held by a call over
# tcp0; a call over tcp1 queues behind it; the reload drops tcp1, which has
# nothing in flight.  (With a 3 s hold, under ThreadSanitizer the second
# caller reached the gateway only after the first call had ended, and
# nothing queued.)  Before, tcp1 was closed at once and the queued
# request answered into the closed network: its caller got no answer and
# saw CW_DISCONNECTED only when its transport gave up on the peer (6.5 s).
start_echo slow3 "shm://$TAG-slow3" 8000
qadmin="127.0.0.1:$(free_port)"
qport=$(free_port)
write_qcfg() {
    cat >"$T/gwq.yaml.tmp" <<YAML
gateway: { name: rlqgw, admin: "$qadmin" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gwq" }
$1
routes:
  - { dest: "shm://*", via: shm0, max_inflight: 1 }
YAML
    gw_cfg_threads "$T/gwq.yaml.tmp"
    mv "$T/gwq.yaml.tmp" "$T/gwq.yaml"
}
write_qcfg "  - { name: tcp1, address: \"ofi+tcp://127.0.0.1:$qport\" }"
start_gw gwq "$T/gwq.yaml"
timeout 60 "$CW_PING" -q -c 1 -t 20000 "$slow3@$gwq_tcp0" >"$T/hold.out" 2>&1 &
hold=$!
wait_for sh -c "'$CWCTL' --admin '$qadmin' stats --json | grep -q '\"inflight\":1,'" ||
    fail "the call holding the route is not in flight: $("$CWCTL" --admin "$qadmin" stats --json)"
timeout 60 "$CW_PING" -q -c 1 -t 20000 "$slow3@$gwq_tcp1" >"$T/queued.out" 2>"$T/queued.err" &
queued=$!
wait_for sh -c "'$CWCTL' --admin '$qadmin' stats --json | grep -q '\"queued\":1,'" ||
    fail "the call over tcp1 is not queued: $("$CWCTL" --admin "$qadmin" stats --json)"
write_qcfg ""
t0=$(date +%s%N)
"$CWCTL" --admin "$qadmin" reload >"$T/reload.out" 2>&1 || fail "reload dropping tcp1: $(cat "$T/reload.out")"
wait "$queued"
ms=$((($(date +%s%N) - t0) / 1000000))
grep -q "1 calls, CW_UNREACHABLE=1;" "$T/queued.out" ||
    fail "queued call on the dropped network (after $ms ms): $(cat "$T/queued.out") $(tail -n 2 "$T/queued.err")"
[ "$ms" -lt 2500 ] || fail "queued call on the dropped network answered after $ms ms"
pass "queued call on the dropped network answered in $ms ms: $(cat "$T/queued.out")"
wait_for sh -c "! '$CWCTL' --admin '$qadmin' status | grep -q '^tcp1 '" ||
    fail "tcp1 still listed: $("$CWCTL" --admin "$qadmin" status)"
wait "$hold" || fail "the call holding the route: $(cat "$T/hold.out")"
grep -q "1 calls, CW_OK=1;" "$T/hold.out" || fail "the call holding the route: $(cat "$T/hold.out")"
pass "tcp1 closed; the call over tcp0 served: $(cat "$T/hold.out")"
# A reload that changes a key only a restart applies is applied for the
# rest, and says so: cwctl exits 4 naming the key, status shows it as
# restart_pending, a second reload of the same file still reports it, and
# a reload back to the running value clears it.
sed -i 's/name: rlqgw,/name: rlqgw2,/' "$T/gwq.yaml"
"$CWCTL" --admin "$qadmin" reload >"$T/reload.out" 2>&1
rc=$?
[ $rc = 4 ] && grep -q "not applied until a restart: gateway.name" "$T/reload.out" ||
    fail "reload changing gateway.name: exit $rc: $(cat "$T/reload.out")"
"$CWCTL" --admin "$qadmin" reload >"$T/reload2.out" 2>&1
rc=$?
[ $rc = 4 ] || fail "the same file again: exit $rc: $(cat "$T/reload2.out")"
st=$("$CWCTL" --admin "$qadmin" status --json)
echo "$st" | grep -q '"restart_pending":\["gateway.name"\]' ||
    fail "status after a restart-only change: $st"
sed -i 's/name: rlqgw2,/name: rlqgw,/' "$T/gwq.yaml"
"$CWCTL" --admin "$qadmin" reload >"$T/reload.out" 2>&1 ||
    fail "reload back to the running name: $(cat "$T/reload.out")"
"$CWCTL" --admin "$qadmin" status --json | grep -q '"restart_pending":\[\]' ||
    fail "restart_pending not cleared: $("$CWCTL" --admin "$qadmin" status --json)"
pass "a restart-only change: cwctl reload exit 4 naming gateway.name (twice), status restart_pending, cleared by the reload back"
gw_stop_clean gwq

