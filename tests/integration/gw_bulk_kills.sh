#!/bin/bash
# Callers killed mid-transfer, round after round, on ucx+tcp (docs/gateway.md,
# "Limitations": UCX 1.13's put-zcopy assertion).  Each round starts three
# echo callers (64 KiB calls, 16 in flight, the data also as a bulk handle
# the server pulls through the gateway) and three 256 MiB pulls through
# the gateway's staging, then kills all six (-9) 0.1-0.5 s later.  With
# UCX's put-zcopy on (UCX_TCP_PUT_ENABLE=y) this aborted the gateway in 9
# of 11 runs, after 20-114 rounds (two runs survived 60 and 200);
# causewayd turns put-zcopy off.  After KILL_ROUNDS rounds (default
# 100) the gateway is alive, has nothing in flight and all its staging
# free, still forwards and pipelines, and stops cleanly.
. "$(dirname "$0")/gw_lib.sh"
. "$(dirname "$0")/gw_bulk_lib.sh"
ROUNDS=${KILL_ROUNDS:-100}
# UCX warns at exit about messages that lost their receiver: errors only.
export UCX_LOG_LEVEL=error

fabric_here "ucx+tcp://127.0.0.1:0" || {
    echo "SKIP: ucx+tcp absent here ($FABRIC_WHY)"
    exit 77
}
start_echo v "ucx+tcp://127.0.0.1:0" 20
bulk_srv x "ucx+tcp://127.0.0.1:0"
bulk_gw gw "ucx0=ucx+tcp://127.0.0.1:0" "256KiB 4 1MiB" "127.0.0.1:$(free_port)"
admin=$gw_admin
stats() { "$CWCTL" --admin "$admin" stats --json; }

for round in $(seq "$ROUNDS"); do
    for _ in 1 2 3; do
        victims_start "$v@$gw_ucx0" "$x@$gw_ucx0"
    done
    sleep "0.$((RANDOM % 5 + 1))" # sleep-ok: a random moment for the kills
    victims_kill
    kill -0 "$gw_PID" 2>/dev/null || fail "the gateway died in round $round"
done
pass "$ROUNDS rounds of six callers killed mid-transfer: the gateway is alive"

wait_for sh -c "'$CWCTL' --admin '$admin' stats --json | grep -q '^{\"inflight\":0,'" ||
    fail "gateway still has RPCs in flight: $(stats | head -c 300)"
# A pull whose origin died ends once the gateway notices (UCX keepalive).
staging_idle() {
    local s
    s=$(stats)
    [ "$(json_num "$s" staging_free)" = "$(json_num "$s" staging_chunks)" ] &&
        [ "$(json_num "$s" tokens_live)" = 0 ]
}
wait_for staging_idle || wait_for staging_idle ||
    fail "staging not all free: $(stats | grep -o '"bulk":.*')"
pass "nothing in flight, staging all free, no live token"
ping_expect "still forwards" CW_OK -c 20 -n 4 -s 0,64K --with-bulk "$v@$gw_ucx0"
xfer "and still pipelines" "$x@$gw_ucx0" 1,3M
gw_stop_clean gw
