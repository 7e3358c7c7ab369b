#!/bin/bash
# The admin interface on a non-loopback address (gateway.admin 0.0.0.0):
# reads (status, stats, metrics, HTTP GET) answer a client on another
# address; reload and drain are refused to it (cwctl exit 1, HTTP 403,
# logged) and the gateway keeps serving; from loopback they work.  All in
# a network namespace of its own with a veth pair inside it (10.232.0.1),
# so that a "remote" client exists without any traffic leaving it.
# Skips (77) where namespaces cannot be created.
. "$(dirname "$0")/gw_lib.sh"

ns=cwad$$
if ! ns_make "$ns"; then
    echo "SKIP: cannot create network namespaces here (need root and iproute2)"
    exit 77
fi
nx() { ip netns exec "$ns" "$@"; }
if ! nx ip link add va type veth peer name vb 2>/dev/null; then
    echo "SKIP: cannot create veth pairs here"
    exit 77
fi
nx ip addr add 10.232.0.1/24 dev va && nx ip link set va up &&
    nx ip link set vb up || fail "veth up in $ns"
REMOTE=10.232.0.1:9464
LOCAL=127.0.0.1:9464

start_echo echo "shm://$TAG-echo" 0 ip netns exec "$ns"
tcp_shm_gw gw 'admin: "0.0.0.0:9464", drain_grace: 2s' ip netns exec "$ns"
nx "$CW_PING" -q -c 5 "$echo@$gw_tcp0" >"$T/ping.out" ||
    fail "echo through the gateway: $(cat "$T/ping.out")"

# Reads from the other address.
nx "$CWCTL" --admin "$REMOTE" status >"$T/status.out" || fail "remote status"
grep -q "^state *serving" "$T/status.out" || fail "status: $(cat "$T/status.out")"
nx "$CWCTL" --admin "$REMOTE" metrics >"$T/metrics.txt" || fail "remote metrics"
python3 "$(dirname "$0")/metrics_check.py" 'causeway_gateway_rpcs_total{result="forwarded"}=5' \
    <"$T/metrics.txt" >"$T/metrics.check" || fail "remote metrics: $(cat "$T/metrics.check")"
nx bash -c "exec 3<>/dev/tcp/10.232.0.1/9464; printf 'GET /stats?json HTTP/1.0\r\n\r\n' >&3; timeout 5 cat <&3" >"$T/get.out"
head -n 1 "$T/get.out" | grep -q "^HTTP/1.0 200" || fail "remote GET: $(head -n 3 "$T/get.out")"
pass "reads answer a client on 10.232.0.1: status, metrics, HTTP GET"

# Changes from the other address: refused, nothing happens.
for cmd in reload drain; do
    nx "$CWCTL" --admin "$REMOTE" "$cmd" >"$T/$cmd.out" 2>&1
    rc=$?
    [ "$rc" = 1 ] && grep -q "forbidden: $cmd is accepted from this host only" "$T/$cmd.out" ||
        fail "remote $cmd: exit $rc: $(cat "$T/$cmd.out")"
done
nx bash -c "exec 3<>/dev/tcp/10.232.0.1/9464; printf 'POST /drain HTTP/1.0\r\n\r\n' >&3; timeout 5 cat <&3" >"$T/post.out"
head -n 1 "$T/post.out" | grep -q "^HTTP/1.0 403" || fail "remote POST /drain: $(head -n 3 "$T/post.out")"
grep -q "admin: reload from a remote address refused" "$T/gw.log" ||
    fail "refusal not logged: $(tail -n 5 "$T/gw.log")"
nx "$CWCTL" --admin "$LOCAL" status | grep -q "^state *serving" ||
    fail "gateway no longer serving after refused commands"
nx "$CW_PING" -q -c 5 "$echo@$gw_tcp0" >"$T/ping.out" ||
    fail "echo after refused commands: $(cat "$T/ping.out")"
pass "reload and drain from 10.232.0.1 refused (cwctl exit 1, HTTP 403, logged); still serving"

# The same from loopback: done.
nx "$CWCTL" --admin "$LOCAL" reload >"$T/reload.out" || fail "local reload: $(cat "$T/reload.out")"
nx "$CWCTL" --admin "$LOCAL" drain >"$T/drain.out" || fail "local drain: $(cat "$T/drain.out")"
stop_pid "$gw_PID"
[ "$STOP_RC" = 0 ] || fail "gateway exit status $STOP_RC after the local drain"
pass "reload and drain from 127.0.0.1 done; the gateway exited 0"
