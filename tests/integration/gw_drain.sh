#!/bin/bash
# Drain: SIGTERM while 4 slow RPCs are in flight; a new RPC gets
# CW_DRAINING at once (the metrics say draining, 4 in flight), the 4
# finish with CW_OK, the gateway exits 0.
# Then drain by cwctl with a short grace: what is left is canceled.
# First, the idle gateway sleeps: few wake-ups a second (it blocks on its
# networks, signalfd and admin socket) yet answers cwctl at once.
. "$(dirname "$0")/gw_lib.sh"

# 4 s: the RPC sent while draining comes from a new cw-ping, whose start
# (plugins, first connection) took most of a second under ASan on a busy
# machine, and then cwctl reads the metrics; the drain must still be on.
start_echo slow "shm://$TAG-slow" 4000
tcp_shm_gw gw "admin: \"127.0.0.1:$(free_port)\", drain_grace: 5s"

# Voluntary context switches of all the gateway's threads: one per sleep.
wakeups() { cat /proc/"$gw_PID"/task/*/status 2>/dev/null |
    awk '/^voluntary_ctxt_switches/ { n += $2 } END { print n + 0 }'; }
"$CWCTL" --admin "$gw_admin" status >/dev/null || fail "cwctl status"
w0=$(wakeups)
sleep 1 # sleep-ok: the window the wake-ups are counted over
w1=$(wakeups)
[ $((w1 - w0)) -lt 100 ] ||
    fail "idle gateway woke $((w1 - w0)) times in 1 s (polling, not sleeping)"
"$CWCTL" --admin "$gw_admin" status >/dev/null || fail "cwctl status when idle"
pass "idle gateway: $((w1 - w0)) wake-ups in 1 s, admin answers"

timeout 30 "$CW_PING" -q -c 4 -n 4 -t 8000 "$slow@$gw_tcp0" >"$T/inflight.out" &
inflight=$!
wait_for sh -c "'$CWCTL' --admin '$gw_admin' status --json | grep -q '\"inflight\":4'" ||
    fail "the 4 RPCs did not reach the gateway"
kill -TERM "$gw_PID"
wait_for sh -c "'$CWCTL' --admin '$gw_admin' status --json | grep -q '\"state\":\"draining\"'" ||
    fail "no drain after SIGTERM: $("$CWCTL" --admin "$gw_admin" status --json)"
ping_expect "new RPC while draining" CW_DRAINING -c 2 -t 2000 "$slow@$gw_tcp0"
# The slow echo holds the 4 for 4 s: still draining, and the metrics say so.
metrics_expect "$gw_admin" "causeway_gateway_draining=1" \
    "causeway_gateway_inflight_rpcs=4" \
    'causeway_gateway_rpcs_total{result="draining"}=2'
pass "metrics while draining: draining 1, 4 in flight, 2 answered draining"
wait "$inflight"
grep -q "4 calls, CW_OK=4;" "$T/inflight.out" || fail "in-flight RPCs: $(cat "$T/inflight.out")"
pass "in-flight RPCs finished: $(cat "$T/inflight.out")"
stop_pid "$gw_PID"
[ "$STOP_RC" = 0 ] || fail "gateway exit status $STOP_RC after drain"
pass "gateway exited 0"

sed -i 's/drain_grace: 5s/drain_grace: 200ms/' "$T/gw.yaml"
start_gw gw "$T/gw.yaml"
timeout 30 "$CW_PING" -q -c 2 -n 2 -t 8000 "$slow@$gw_tcp0" >"$T/inflight.out" &
inflight=$!
wait_for sh -c "'$CWCTL' --admin '$gw_admin' status --json | grep -q '\"inflight\":2'" ||
    fail "the 2 RPCs did not reach the gateway"
"$CWCTL" --admin "$gw_admin" drain >/dev/null || fail "cwctl drain"
wait "$inflight"
grep -q "2 calls, CW_CANCELED=2" "$T/inflight.out" || fail "after the grace: $(cat "$T/inflight.out")"
pass "grace over: $(cat "$T/inflight.out")"
stop_pid "$gw_PID"
[ "$STOP_RC" = 0 ] || fail "gateway exit status $STOP_RC after cwctl drain"
pass "gateway exited 0 after cwctl drain"

# A request the gateway is still receiving when the drain starts.  In a
# network namespace of its own whose loopback is throttled (tbf, 20 Mbit/s;
# the bucket holds a whole 64 KiB loopback packet)
# the gateway pulls a caller's 8 MiB of overflowed arguments for over three
# seconds before it can forward them (at 50 Mbit/s, 1.3 s, a loaded run saw
# the pull, sent SIGTERM, and the request had been forwarded meanwhile); SIGTERM meanwhile must not cut that
# caller off: the drain waits for it and answers it CW_DRAINING (a gateway
# that exited under it would leave the caller an error instead).
# Where a namespace or the tbf qdisc cannot be had, the case is left out
# and the test exits 77 after the others (skip_case).
ns=cwdr$$
nx() { ip netns exec "$ns" "$@"; }
drain_during_pull() {
    start_echo nsecho "shm://$TAG-nsecho" 0 ip netns exec "$ns"
    tcp_shm_gw ngw "admin: \"127.0.0.1:$(free_port)\", drain_grace: 30s" ip netns exec "$ns"
    nx timeout 60 "$CW_PING" -c 1 -s 8388608 -t 40000 "$nsecho@$ngw_tcp0" \
        >"$T/pull.out" 2>&1 &
    puller=$!
    # Received (unanswered) but not forwarded (nothing in flight): pulling.
    wait_for sh -c "ip netns exec '$ns' '$CWCTL' --admin '$ngw_admin' status --json |
        grep -q '\"inflight\":0,\"unanswered\":1,'" ||
        fail "the 8 MiB request was not seen being pulled: $(cat "$T/pull.out")"
    kill -TERM "$ngw_PID"
    wait "$puller"
    grep -q "1 calls, CW_DRAINING=1;" "$T/pull.out" ||
        fail "the request being pulled at SIGTERM: $(cat "$T/pull.out")"
    pass "drain waited for a request being pulled, then answered it: $(tail -n 1 "$T/pull.out")"
    stop_pid "$ngw_PID"
    [ "$STOP_RC" = 0 ] || fail "gateway exit status $STOP_RC after that drain"
    pass "gateway exited 0"
}
if ! command -v tc >/dev/null; then
    skip_case "drain during a pull" "no tc (iproute2) to throttle a loopback"
elif ! ns_make "$ns"; then
    skip_case "drain during a pull" "$NS_WHY"
elif ! why=$(nx tc qdisc add dev lo root tbf rate 20mbit burst 256kb latency 400ms 2>&1); then
    skip_case "drain during a pull" "tc qdisc add ... tbf: $why"
else
    drain_during_pull
fi
