#!/bin/bash
# Two gateways in a chain (multi-hop):
#   client -[ofi+tcp]-> gw1 -[ucx+tcp]-> gw2 -[shm]-> echo
# reached by an explicit chain "target@gw2@gw1", by a route on gw1 that
# names gw2 as next hop ("target@gw1"), and by svc:echo on gw2 through gw1;
# by a plain address from a client with a routes file;
# then a routing loop between two gateways is stopped by the hop limit.
# gw1 runs with two threads.
. "$(dirname "$0")/gw_lib.sh"

start_echo echo "shm://$TAG-echo"
cat >"$T/gw2.yaml" <<YAML
gateway: { name: gw2, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw2" }
services:
  - { name: echo, backends: ["$echo"] }
YAML
start_gw gw2 "$T/gw2.yaml"
cat >"$T/gw1.yaml" <<YAML
gateway: { name: gw1, admin: "127.0.0.1:$(free_port)", threads: 2 }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
routes:
  - { dest: "shm://*", gateway: "$gw2_ucx0", hop: 1 }
YAML
start_gw gw1 "$T/gw1.yaml"

ping_expect "explicit chain target@gw2@gw1" CW_OK -c 8 -s 0,64,4096,65536 \
    "$echo@$gw2_ucx0@$gw1_tcp0"
ping_expect "route on gw1 to next hop gw2 (target@gw1)" CW_OK -c 8 \
    -s 0,64,4096,65536 "$echo@$gw1_tcp0"
ping_expect "svc:echo@gw2@gw1" CW_OK -c 4 "svc:echo@$gw2_ucx0@$gw1_tcp0"

# A client that only knows the plain address and has a routes file
# naming gw1 goes through gw1 transparently (counted there).
cat >"$T/client-routes.yaml" <<YAML
routes:
  - { dest: "shm://*", gateway: "$gw1_tcp0" }
YAML
before=$(json_num "$("$CWCTL" --admin "$gw1_admin" stats --json)" forwarded)
CAUSEWAY_ROUTES="$T/client-routes.yaml" ping_expect \
    "plain address with a client routes file" CW_OK -c 4 -s 64,65536 "$echo"
after=$(json_num "$("$CWCTL" --admin "$gw1_admin" stats --json)" forwarded)
[ $((after - before)) = 4 ] || fail "gw1 forwarded $((after - before)) of the 4"
pass "the 4 calls crossed gw1"

routes=$("$CWCTL" --admin "$gw1_admin" routes --json) || fail "cwctl routes"
[ "$(json_num "$routes" forwarded)" -ge 8 ] ||
    fail "gw1 route to gw2 did not count its RPCs: $routes"
pass "gw1 counts the RPCs on its route to gw2"

# A loop: gwA sends ofi+sockets traffic to gwB, gwB back to gwA.
pa=$(free_port)
pb=$(free_port)
cat >"$T/gwa.yaml" <<YAML
gateway: { name: gwa, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:$pa" }
routes:
  - { dest: "ofi+sockets://*", gateway: "ofi+tcp://127.0.0.1:$pb" }
limits: { max_hops: 4 }
YAML
cat >"$T/gwb.yaml" <<YAML
gateway: { name: gwb, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:$pb" }
routes:
  - { dest: "ofi+sockets://*", gateway: "ofi+tcp://127.0.0.1:$pa" }
limits: { max_hops: 4 }
YAML
start_gw gwa "$T/gwa.yaml"
start_gw gwb "$T/gwb.yaml"
ping_expect "routing loop stopped by the hop limit" CW_TTL_EXPIRED -c 2 -t 5000 \
    "ofi+sockets://127.0.0.1:9@$gwa_tcp0"
