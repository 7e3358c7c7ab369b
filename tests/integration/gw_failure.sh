#!/bin/bash
# The target dies with RPCs in flight: every one completes at the origin
# with an error well before its deadline; the gateway frees its state and
# keeps serving another route.
. "$(dirname "$0")/gw_lib.sh"

start_echo slow "ucx+tcp://127.0.0.1:0" 3000
start_echo other "shm://$TAG-other"
cat >"$T/gw.yaml" <<YAML
gateway: { name: flgw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
YAML
start_gw gw "$T/gw.yaml"

t0=$(date +%s%N)
timeout 30 "$CW_PING" -q -c 4 -n 4 -t 20000 "$slow@$gw_tcp0" >"$T/dead.out" &
client=$!
wait_for sh -c "'$CWCTL' --admin '$gw_admin' status --json | grep -q '\"inflight\":4'" ||
    fail "the 4 RPCs did not reach the gateway"
gw_kill "$slow_PID"
wait "$client"
t1=$(date +%s%N)
grep -q "4 calls" "$T/dead.out" && ! grep -q "CW_OK" "$T/dead.out" ||
    fail "RPCs to the dead target: $(cat "$T/dead.out")"
[ $(((t1 - t0) / 1000000)) -lt 15000 ] || fail "errors took $(((t1 - t0) / 1000000)) ms"
pass "target killed: $(cat "$T/dead.out") after $(((t1 - t0) / 1000000)) ms (deadline 20 s)"
wait_for sh -c "'$CWCTL' --admin '$gw_admin' stats --json | grep -q '^{\"inflight\":0,'" ||
    fail "gateway state not freed"
pass "gateway freed the forwarded RPCs"
ping_expect "other route still served" CW_OK -c 10 "$other@$gw_tcp0"
