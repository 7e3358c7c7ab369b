#!/bin/bash
# Deadlines and cancel through a gateway to a slow target (answers after
# 1.5 s): a 300 ms deadline ends with CW_TIMEOUT at the origin in time,
# counted by the gateway; a cancel at the origin ends with CW_CANCELED at
# once and propagates through the gateway to the target; the gateway frees
# every forwarded RPC and keeps serving.
. "$(dirname "$0")/gw_lib.sh"

start_echo slow "shm://$TAG-slow" 1500
start_echo fast "shm://$TAG-fast"
cat >"$T/gw.yaml" <<YAML
gateway: { name: dlgw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
YAML
start_gw gw "$T/gw.yaml"

timeout 60 "$CW_PING" --expect CW_TIMEOUT -c 4 -n 4 -t 300 "$slow@$gw_tcp0" \
    >"$T/ping.out" 2>"$T/ping.err" || fail "300 ms deadline: $(cat "$T/ping.out")"
# Each call reports how long it took: "... CW_TIMEOUT (...) after N us".
worst=$(grep -o 'after [0-9]*' "$T/ping.out" | cut -d' ' -f2 | sort -n | tail -n 1)
[ -n "$worst" ] && [ "$worst" -lt 1000000 ] ||
    fail "timeouts took up to ${worst:-?} us (deadline 300 ms): $(cat "$T/ping.out")"
pass "300 ms deadline at a slow target: CW_TIMEOUT x4, slowest after $worst us"
wait_for sh -c "[ \"\$('$CWCTL' --admin '$gw_admin' stats --json | grep -o '\"timedout\":[0-9]*' | head -n 1)\" = '\"timedout\":4' ]" ||
    fail "gateway did not count 4 timeouts: $("$CWCTL" --admin "$gw_admin" stats --json)"
pass "gateway answered and counted 4 timeouts"

# The calls are canceled 1 s after they are sent, when the gateway has
# forwarded them (with 100 ms, under ThreadSanitizer the caller's cancels
# overtook three of the four requests, which the gateway then never
# forwarded: it counted 1 canceled forward, in every run); the target
# holds each for 3 s.
start_echo slow2 "shm://$TAG-slow2" 3000
ping_expect "cancel at the origin" CW_CANCELED -c 4 -n 4 -t 10000 --cancel-after 1000 "$slow2@$gw_tcp0"
# The cancel travels on: the gateway's forwards end canceled long before
# the target's 3 s, and the target sees its requests canceled.
t0=$(date +%s%N)
wait_for sh -c "'$CWCTL' --admin '$gw_admin' stats --json | grep -q '^{\"inflight\":0,.*\"canceled\":4,'" ||
    fail "gateway did not cancel its forwards: $("$CWCTL" --admin "$gw_admin" stats --json)"
t1=$(date +%s%N)
[ $(((t1 - t0) / 1000000)) -lt 1000 ] || fail "forwards ended only after $(((t1 - t0) / 1000000)) ms"
pass "cancel propagated to the gateway: 4 forwards canceled, 0 in flight"
stop_pid "$slow2_PID"
grep -q "canceled by their caller 4" "$T/slow2.log" ||
    fail "target did not see the cancels: $(cat "$T/slow2.log")"
pass "cancel propagated to the target: $(grep 'canceled by' "$T/slow2.log")"
ping_expect "other target still served" CW_OK -c 10 "$fast@$gw_tcp0"
wait_for sh -c "'$CWCTL' --admin '$gw_admin' stats --json | grep -q '^{\"inflight\":0,'" ||
    fail "forwarded RPCs not freed: $("$CWCTL" --admin "$gw_admin" stats --json)"
pass "gateway state freed (0 in flight)"

# limits.max_timeout cuts a longer deadline short.
cat >"$T/gwm.yaml" <<YAML
gateway: { name: maxgw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gwm" }
limits: { max_timeout: 200ms, default_timeout: 200ms }
YAML
start_gw gwm "$T/gwm.yaml"
timeout 60 "$CW_PING" --expect CW_TIMEOUT -c 2 -n 2 -t 10000 "$slow@$gwm_tcp0" \
    >"$T/ping.out" 2>"$T/ping.err" || fail "max_timeout: $(cat "$T/ping.out")"
worst=$(grep -o 'after [0-9]*' "$T/ping.out" | cut -d' ' -f2 | sort -n | tail -n 1)
[ -n "$worst" ] && [ "$worst" -lt 1000000 ] ||
    fail "max_timeout 200 ms: answered after ${worst:-?} us"
pass "limits.max_timeout 200 ms cut a 10 s deadline: CW_TIMEOUT after $worst us"
