#!/bin/bash
# Network namespaces: client, server and gateway each in their own
# namespace; the gateway's is joined to the other two by veth pairs, IP
# forwarding off.  The client cannot reach the server directly (asserted)
# and reaches it through "target@gateway".  Skips (77) where namespaces
# cannot be created.  Only the namespaces created here are touched.
. "$(dirname "$0")/gw_lib.sh"

id=$$
NC=cwc$id NS=cws$id NG=cwg$id
ns_cleanup() {
    for n in $NC $NS $NG; do ip netns del "$n" 2>/dev/null; done
}
CLEANUP_HOOKS="ns_cleanup"

if ! ns_make "$NC"; then
    echo "SKIP: $NS_WHY"
    exit 77
fi
ip netns add "$NS" && ip netns add "$NG" || fail "ip netns add"
# veth names must be unique host-wide while they are created.
if ! why=$(ip link add "vc$id" netns "$NC" type veth peer name "vgc$id" netns "$NG" 2>&1); then
    echo "SKIP: cannot create veth pairs here: ip link add ... type veth: $why"
    exit 77
fi
ip link add "vs$id" netns "$NS" type veth peer name "vgs$id" netns "$NG" ||
    fail "a second veth pair"
nx() { local n=$1; shift; ip netns exec "$n" "$@"; }
for n in $NC $NS $NG; do nx "$n" ip link set lo up || fail "lo up in $n"; done
nx "$NC" ip addr add 10.231.1.1/24 dev "vc$id"
nx "$NG" ip addr add 10.231.1.2/24 dev "vgc$id"
nx "$NG" ip addr add 10.231.2.2/24 dev "vgs$id"
nx "$NS" ip addr add 10.231.2.1/24 dev "vs$id"
nx "$NC" ip link set "vc$id" up
nx "$NG" ip link set "vgc$id" up
nx "$NG" ip link set "vgs$id" up
nx "$NS" ip link set "vs$id" up
# Default routes point at the gateway, which does not forward IP.
nx "$NC" ip route add default via 10.231.1.2
nx "$NS" ip route add default via 10.231.2.2
nx "$NG" sysctl -q -w net.ipv4.ip_forward=0 || fail "ip_forward=0"
[ "$(nx "$NG" cat /proc/sys/net/ipv4/ip_forward)" = 0 ] || fail "forwarding on"
pass "namespaces $NC $NS $NG, forwarding off in $NG"

start_echo echo "ofi+tcp://10.231.2.1:0" 0 ip netns exec "$NS"
pass "server in $NS at $echo"
gp=$(( (id % 20000) + 30000 ))
cat >"$T/gw.yaml" <<YAML
gateway: { name: nsgw, admin: "" }
networks:
  - { name: client_side, address: "ofi+sockets://10.231.1.2:$gp" }
  - { name: server_side, address: "ofi+tcp://10.231.2.2:0" }
YAML
start_gw gw "$T/gw.yaml" ip netns exec "$NG"
pass "gateway in $NG: $gw_client_side | $gw_server_side"

if nx "$NC" timeout 20 "$CW_PING" -q -c 1 -t 2000 "$echo" >"$T/direct.out" 2>&1; then
    fail "the client reached the server directly: $(cat "$T/direct.out")"
fi
pass "client cannot reach the server directly: $(tail -n 1 "$T/direct.out")"
nx "$NC" timeout 30 "$CW_PING" -q --expect CW_OK -c 10 -s 0,64,4096,65536 \
    "$echo@$gw_client_side" >"$T/via.out" 2>&1 ||
    fail "through the gateway (exit status $?): $(cat "$T/via.out")"
pass "through the gateway: $(tail -n 1 "$T/via.out")"
