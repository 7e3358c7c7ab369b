#!/bin/bash
# Two gateways in parallel behind a front gateway; one is killed: after at
# most eject_after failures the route fails over to the other; when the
# killed one comes back on the same address, health pings return it.
#   client -[shm]-> front -[ofi+tcp]-> gwA | gwB -[ucx+tcp]-> echo
. "$(dirname "$0")/gw_lib.sh"

start_echo echo "ucx+tcp://127.0.0.1:0"
pa=$(free_port)
pb=$(free_port)
for n in a b; do
    eval "p=\$p$n"
    cat >"$T/gw$n.yaml" <<YAML
gateway: { name: gw$n, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:$p" }
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
YAML
    start_gw "gw$n" "$T/gw$n.yaml"
done
cat >"$T/front.yaml" <<YAML
gateway: { name: front, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: shm0, address: "shm://$TAG-front" }
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
routes:
  - { dest: "ucx+tcp://*", gateway: "$gwa_tcp0" }
  - { dest: "ucx+tcp://*", gateway: "$gwb_tcp0" }
health: { interval: 200ms, timeout: 200ms, eject_after: 2, recover_after: 2 }
YAML
start_gw front "$T/front.yaml"

# hop_state NAME STATE: the front has gateway NAME's hop in STATE.
hop_state() {
    local a
    eval "a=\$${1}_tcp0"
    "$CWCTL" --admin "$front_admin" routes --json |
        grep -q "\"nexthop\":\"$a\"[^}]*\"state\":\"$2\""
}
# A slow start (sanitizers, a loaded machine) can time out the first
# health checks and take a hop out of rotation for a moment; then the
# calls all take the other one.  Each round waits for both hops up first.
spread() {
    echo "$routes" | grep -q "\"nexthop\":\"$gwa_tcp0\"[^}]*\"forwarded\":[1-9]" &&
        echo "$routes" | grep -q "\"nexthop\":\"$gwb_tcp0\"[^}]*\"forwarded\":[1-9]"
}
for round in 1 2 3 4 5; do
    wait_for hop_state gwa up && wait_for hop_state gwb up ||
        fail "both hops not up: $("$CWCTL" --admin "$front_admin" routes --json)"
    ping_expect "both gateways up (round $round)" CW_OK -c 20 "$echo@$front_shm0"
    routes=$("$CWCTL" --admin "$front_admin" routes --json) || fail "cwctl routes"
    spread && break
done
spread || fail "traffic not spread over both gateways: $routes"
pass "traffic spread over both gateways"

# Log lines from the kill on only: a slow start may have taken a hop out
# of rotation (and back) before, logged then.
since_kill() { tail -n "+$((kill_line + 1))" "$T/front.log"; }
kill_line=$(wc -l <"$T/front.log")
gw_kill "$gwa_PID"
timeout 60 "$CW_PING" -q -c 20 -t 2000 "$echo@$front_shm0" >"$T/ping.out"
ok=$(grep -o 'CW_OK=[0-9]*' "$T/ping.out" | cut -d= -f2)
[ "${ok:-0}" -ge 17 ] || fail "after the kill only ${ok:-0}/20 succeeded: $(cat "$T/ping.out")"
pass "failover after the kill: $(cat "$T/ping.out")"
wait_for sh -c "'$CWCTL' --admin '$front_admin' routes --json | grep -q '\"nexthop\":\"$gwa_tcp0\"[^}]*\"state\":\"down\"'" ||
    fail "killed gateway not marked down"
pass "killed gateway marked down"
n=$(since_kill | grep -c "next hop $gwa_tcp0 out of rotation: 2 consecutive failures")
[ "$n" = 1 ] || fail "front logged the hop down $n times since the kill: $(since_kill | grep rotation)"
pass "logged once since the kill: $(since_kill | grep -o "next hop $gwa_tcp0 out of rotation.*")"
metrics_expect "$front_admin" "causeway_nexthop_up{nexthop=\"$gwa_tcp0\"}=0" \
    "causeway_nexthop_up{nexthop=\"$gwb_tcp0\"}=1"
pass "metrics: gwa's next hop 0, gwb's 1"
ping_expect "all calls succeed on the survivor" CW_OK -c 20 "$echo@$front_shm0"

start_gw gwa "$T/gwa.yaml"
wait_for sh -c "'$CWCTL' --admin '$front_admin' routes --json | grep -q '\"nexthop\":\"$gwa_tcp0\"[^}]*\"state\":\"up\"'" ||
    fail "restarted gateway not back in rotation"
pass "restarted gateway back in rotation (health pings)"
n=$(since_kill | grep -c "next hop $gwa_tcp0 back in rotation")
[ "$n" = 1 ] || fail "front logged the return $n times since the kill: $(since_kill | grep rotation)"
pass "the return logged once since the kill"
metrics_expect "$front_admin" "causeway_nexthop_up{nexthop=\"$gwa_tcp0\"}=1"
pass "metrics: gwa's next hop back to 1"
ping_expect "calls after the return" CW_OK -c 10 "$echo@$front_shm0"
