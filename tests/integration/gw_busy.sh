#!/bin/bash
# Admission: with max_inflight_rpcs 8 (no queue) and a slow target, a
# client with 24 calls in flight gets CW_BUSY at once for what is beyond
# the limit, and a second client is still served while the first floods
# (fairness).  Then with a limit of 2 and a queue of 4, of which one
# client may hold 3 (a quarter is kept for other sources): 5 calls are
# served 2 by 2 and 5 more get CW_BUSY; queued calls whose deadline passes
# are answered CW_TIMEOUT.  Then the per-route and per-network caps, with
# fairness in the queue (below).
. "$(dirname "$0")/gw_lib.sh"

# flood_held GW CALLS INFLIGHT QUEUED_RE WHAT [TARGET]: CALLS echo calls,
# INFLIGHT at once, to TARGET ($slow) through GW's tcp0 network, in the
# background ($flood, its summary in $T/GW-flood.out); waits until GW's
# queue matches QUEUED_RE with exactly 2 forwarded, the cap under test.
# The state must last longer than a few cwctl calls take on a loaded
# machine: a short flood takes $slow2 (1 s a call).
flood_held() {
    local gw=$1 admin addr stats target=${6:-$slow}
    eval "admin=\${${gw}_admin} addr=\${${gw}_tcp0}"
    timeout 60 "$CW_PING" -q -c "$2" -n "$3" -t 30000 "$target@$addr" \
        >"$T/$gw-flood.out" &
    flood=$!
    wait_for sh -c "'$CWCTL' --admin '$admin' stats --json | grep -q '\"queued\":$4,'" ||
        fail "$5: flood did not queue: $("$CWCTL" --admin "$admin" stats --json)"
    stats=$("$CWCTL" --admin "$admin" stats --json)
    [ "$(json_num "$stats" inflight)" = 2 ] || fail "$5: cap not held: $stats"
    pass "$5: 2 in flight, the rest queued"
}

start_echo slow "shm://$TAG-slow" 300
start_echo slow2 "shm://$TAG-slow2" 1000
cat >"$T/gw.yaml" <<YAML
gateway: { name: busygw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
limits: { max_inflight_rpcs: 8, max_queued_rpcs: 0 }
YAML
start_gw gw "$T/gw.yaml"

# The flood keeps 24 calls going, a new one every 5 ms at most, so that it
# lasts 5 s at least; once the gateway answers it CW_BUSY (it is over its
# share), a second client must be served while the flood still runs.
t0=$(date +%s%N)
timeout 60 "$CW_PING" -q -c 1000 -n 24 -i 5 -t 5000 "$slow@$gw_tcp0" >"$T/flood.out" &
flood=$!
busy_answered() { [ "$(stat_of "$gw_admin" busy)" -gt 0 ] 2>/dev/null; }
wait_for busy_answered ||
    fail "the flood got no CW_BUSY: $("$CWCTL" --admin "$gw_admin" stats --json)"
pass "the flood is over its share: $(stat_of "$gw_admin" inflight) in flight, $(stat_of "$gw_admin" busy) busy so far"
ping_expect "second client served during the flood" CW_OK -c 3 -t 5000 "$slow@$gw_tcp0"
kill -0 "$flood" 2>/dev/null ||
    fail "the flood had ended before the second client was served: $(cat "$T/flood.out")"
pass "the flood was still running when the second client was served"
wait "$flood"
busy=$(grep -o 'CW_BUSY=[0-9]*' "$T/flood.out" | cut -d= -f2)
okc=$(grep -o 'CW_OK=[0-9]*' "$T/flood.out" | cut -d= -f2)
[ "${busy:-0}" -gt 0 ] && [ "${okc:-0}" -gt 0 ] &&
    [ $((busy + okc)) = 1000 ] || fail "flood: $(cat "$T/flood.out")"
pass "flood: $(cat "$T/flood.out")"
t1=$(date +%s%N)
[ $(((t1 - t0) / 1000000)) -lt 20000 ] || fail "busy answers were not immediate"
stats=$("$CWCTL" --admin "$gw_admin" stats --json)
[ "$(json_num "$stats" busy)" = "$busy" ] ||
    fail "gateway counted $(json_num "$stats" busy) busy, client saw $busy"
pass "gateway counted $busy busy answers"

stop_pid "$gw_PID"
cat >"$T/gwq.yaml" <<YAML
gateway: { name: queuegw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gwq" }
limits: { max_inflight_rpcs: 2, max_queued_rpcs: 4 }
YAML
start_gw gwq "$T/gwq.yaml"
timeout 60 "$CW_PING" -q -c 10 -n 10 -t 5000 "$slow@$gwq_tcp0" >"$T/q.out"
grep -q "10 calls, CW_OK=5, CW_BUSY=5;" "$T/q.out" || fail "queue: $(cat "$T/q.out")"
pass "3 queued behind 2 slots: $(cat "$T/q.out")"
stats=$("$CWCTL" --admin "$gwq_admin" stats --json)
[ "$(json_num "$stats" queued_total)" = 3 ] || fail "queued_total: $stats"
pass "gateway counted 3 queued"
# Deadline 1.5 s, target 1 s: 2 served, 1 busy, 2 run out of budget at
# the target (they get a slot at 1 s), 1 expires in the queue (its slot
# would come at 2 s).  500 ms of margin each way: with 500 ms at a 300 ms
# target the first two timed out on a loaded machine.
timeout 60 "$CW_PING" -q -c 6 -n 6 -t 1500 "$slow2@$gwq_tcp0" >"$T/qt.out"
grep -q "6 calls, CW_OK=2, CW_TIMEOUT=3, CW_BUSY=1" "$T/qt.out" ||
    fail "queue deadline: $(cat "$T/qt.out")"
pass "queued past their deadline: $(cat "$T/qt.out")"
wait_for sh -c "'$CWCTL' --admin '$gwq_admin' stats --json | grep -q '\"timedout\":3,'" ||
    fail "gateway timeouts: $("$CWCTL" --admin "$gwq_admin" stats --json)"
pass "gateway answered 3 timeouts (queued or downstream)"

# Per-route cap (routes[].max_inflight: 2) with the default queue: a client
# keeping 40 calls in flight fills the route and the queue, and a second
# client arriving later is still served within its 3 s deadline: queued
# requests are taken from each source in turn, not first come first served
# (behind the flood's 38 queued calls a FIFO would take about 6 s).
stop_pid "$gwq_PID"
cat >"$T/gwr.yaml" <<YAML
gateway: { name: routegw, admin: "127.0.0.1:$(free_port)", drain_grace: 2s }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gwr" }
routes:
  - { dest: "shm://*", via: shm0, max_inflight: 2 }
YAML
start_gw gwr "$T/gwr.yaml"
flood_held gwr 80 40 "3[0-9]" "route cap"
ping_expect "second client served past the queued flood" CW_OK -c 2 -t 3000 "$slow@$gwr_tcp0"
kill "$flood" 2>/dev/null
wait "$flood" 2>/dev/null || true
# Its queued calls are still there: a drain answers or forwards them all,
# and the gateway exits 0 with nothing leaked.
gw_stop_clean gwr

# Per-network cap (networks[].max_inflight: 2, LNet credits) counts what
# arrived on that network: 6 calls in flight over tcp0 hold 2 slots and
# queue 4, and a call arriving on shm0 meanwhile goes straight through
# (within a 900 ms deadline at a 300 ms target: waiting for one of tcp0's
# slots, held 1 s a call, it would take 1.3 s at least).
cat >"$T/gwn.yaml" <<YAML
gateway: { name: netgw, admin: "127.0.0.1:$(free_port)", drain_grace: 2s }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0", max_inflight: 2 }
  - { name: shm0, address: "shm://$TAG-gwn" }
YAML
start_gw gwn "$T/gwn.yaml"
flood_held gwn 6 6 4 "tcp0 cap" "$slow2"
ping_expect "a call arriving on shm0 is not held by tcp0's cap" CW_OK -c 1 -t 900 \
    "$slow@$gwn_shm0"
wait "$flood" || fail "tcp0 flood: $(cat "$T/gwn-flood.out")"
grep -q "6 calls, CW_OK=6;" "$T/gwn-flood.out" || fail "tcp0 flood: $(cat "$T/gwn-flood.out")"
pass "tcp0 flood served 2 by 2: $(cat "$T/gwn-flood.out")"
gw_stop_clean gwn

# A route's cap holds back only that route's requests.  At most 3 RPCs in
# flight (no fair split below 4), the route to $slow capped at 2: a call
# of a second client to $slow2 (1 s) holds the third slot while one client
# (one source address) sends 30 calls to $slow and then 30 to $fast, all
# at once.  2 go to $slow, everything else waits for a slot.  When $slow2
# answers, the calls to $fast must take the free slot one after another
# (about 1 s after they were sent), not wait behind the calls to $slow
# queued before them, whose route stays full for 4.5 s.
start_echo fast "shm://$TAG-fast" 0
cat >"$T/gwl.yaml" <<YAML
gateway: { name: lanegw, admin: "127.0.0.1:$(free_port)", drain_grace: 2s }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gwl" }
limits: { max_inflight_rpcs: 3 }
routes:
  - { dest: "$slow", via: shm0, max_inflight: 2 }
  - { dest: "shm://*", via: shm0 }
YAML
start_gw gwl "$T/gwl.yaml"
timeout 60 "$CW_PING" -q -c 1 -t 30000 "$slow2@$gwl_tcp0" >"$T/hold.out" &
hold=$!
wait_for sh -c "'$CWCTL' --admin '$gwl_admin' stats --json | grep -q '\"inflight\":1,'" ||
    fail "the call to slow2 is not in flight: $("$CWCTL" --admin "$gwl_admin" stats --json)"
timeout 60 "$CW_PING" -q -c 30 -n 30 -i 20 -t 30000 "$slow@$gwl_tcp0" \
    "$fast@$gwl_tcp0" >"$T/lanes.out" || fail "two routes: $(cat "$T/lanes.out")"
wait "$hold" || fail "slow2: $(cat "$T/hold.out")"
grep -q "^--- $slow@.*30 calls, CW_OK=30;" "$T/lanes.out" &&
    grep -q "^--- $fast@.*30 calls, CW_OK=30;" "$T/lanes.out" ||
    fail "two routes: $(cat "$T/lanes.out")"
fast_max=$(grep "^--- $fast@" "$T/lanes.out" | sed 's|.*/\([0-9]*\)\.[0-9]* us;.*|\1|')
[ "${fast_max:-99999999}" -lt 2500000 ] ||
    fail "calls to the free route waited behind the full one: $(cat "$T/lanes.out")"
pass "full route, the other one served as slots free: $(grep "^--- $fast@" "$T/lanes.out")"
gw_stop_clean gwl
