#!/bin/bash
# Drain: SIGTERM while 4 slow RPCs are in flight; a new RPC gets
# CW_DRAINING at once, the 4 finish with CW_OK, the gateway exits 0.
# Then drain by cwctl with a short grace: what is left is canceled.
# First, the idle gateway sleeps: few wake-ups a second (it blocks on its
# networks, signalfd and admin socket) yet answers cwctl at once.
. "$(dirname "$0")/gw_lib.sh"

# 3 s: the RPC sent while draining comes from a new cw-ping, whose start
# (plugins, first connection) took most of a second under ASan on a busy
# machine; the drain must still be on when it arrives.
start_echo slow "shm://$TAG-slow" 3000
cat >"$T/gw.yaml" <<YAML
gateway: { name: drgw, admin: "127.0.0.1:$(free_port)", drain_grace: 5s }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
YAML
start_gw gw "$T/gw.yaml"

# Voluntary context switches of all the gateway's threads: one per sleep.
wakeups() { cat /proc/"$gw_PID"/task/*/status 2>/dev/null |
    awk '/^voluntary_ctxt_switches/ { n += $2 } END { print n + 0 }'; }
"$CWCTL" --admin "$gw_admin" status >/dev/null || fail "cwctl status"
w0=$(wakeups)
sleep 1
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
sleep 0.1
ping_expect "new RPC while draining" CW_DRAINING -c 2 -t 2000 "$slow@$gw_tcp0"
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
