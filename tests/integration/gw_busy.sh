#!/bin/bash
# Admission: with max_inflight_rpcs 8 and a slow target, a client with 24
# calls in flight gets CW_BUSY at once for what is beyond the limit, and a
# second client is still served while the first floods (fairness).
. "$(dirname "$0")/gw_lib.sh"

start_echo slow "shm://$TAG-slow" 300
cat >"$T/gw.yaml" <<YAML
gateway: { name: busygw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
limits: { max_inflight_rpcs: 8 }
YAML
start_gw gw "$T/gw.yaml"

t0=$(date +%s%N)
timeout 60 "$CW_PING" -q -c 48 -n 24 -t 5000 "$slow@$gw_tcp0" >"$T/flood.out" &
flood=$!
sleep 0.3
ping_expect "second client served during the flood" CW_OK -c 3 -t 5000 "$slow@$gw_tcp0"
wait "$flood"
busy=$(grep -o 'CW_BUSY=[0-9]*' "$T/flood.out" | cut -d= -f2)
okc=$(grep -o 'CW_OK=[0-9]*' "$T/flood.out" | cut -d= -f2)
[ "${busy:-0}" -gt 0 ] && [ "${okc:-0}" -gt 0 ] &&
    [ $((busy + okc)) = 48 ] || fail "flood: $(cat "$T/flood.out")"
pass "flood: $(cat "$T/flood.out")"
t1=$(date +%s%N)
[ $(((t1 - t0) / 1000000)) -lt 20000 ] || fail "busy answers were not immediate"
stats=$("$CWCTL" --admin "$gw_admin" stats --json)
[ "$(json_num "$stats" busy)" = "$busy" ] ||
    fail "gateway counted $(json_num "$stats" busy) busy, client saw $busy"
pass "gateway counted $busy busy answers"
