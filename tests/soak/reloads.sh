#!/bin/bash
# Reloads under load (issue 31; docs/reliability.md): while the soak load
# runs (soak_lib.sh: ofi+tcp -> ucx+tcp and shm -> ofi+tcp, bulk
# included), RELOADS reloads alternating a valid and an invalid file, by
# `cwctl reload` and by SIGHUP in turn.  Valid file k gives both routes
# priority k, so each applied reload shows in `cwctl routes`; the invalid
# ones (four kinds of error in turn) must be refused with the old table
# kept: the routes still show the last valid k.  Between two reloads the
# load must have moved (the gateway forwarded more).  At the end every
# RPC completed CW_OK with nothing lost, duplicated or corrupted.
#   reloads.sh CAUSEWAYD CW_PING CWCTL SOAK
# Environment: RELOADS (100) and the load's (soak_lib.sh); RPCS caps each
# client (0: no cap), the load stops when the reloads are done.
RELOADS=${RELOADS:-100}
RPCS=${RPCS:-0}
DURATION=${DURATION:-0}
. "$(dirname "$0")/soak_lib.sh"
[ "$RPCS" != 0 ] || [ "$DURATION" != 0 ] || DURATION=$CLIENT_LIMIT_S

# The invalid files: the valid one with one mistake each.
bad_extra() {
    case $(($1 % 4)) in
    0) echo "limits: { max_inflight_rpcs: 0 }" ;;           # out of range
    1) echo "limtis: { max_inflight_rpcs: 100 }" ;;         # unknown section
    2) echo "health: { interval: 1s, timeout: 2s }" ;;      # cross-key rule
    3) echo "services: [ { name: x, backends: [" ;;         # YAML syntax
    esac
}
bad_what=("out-of-range value" "unknown section" "cross-key rule" "YAML syntax error")

soak_setup
stop_file="$T/stop"
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t0=$(date +%s%N)
soak_clients --stop-file "$stop_file"

fwd_seen=0
# load_moved: every client still runs and the gateway forwarded more
# since the last look.
load_moved() {
    local p f
    for p in $CLIENT_PIDS; do
        kill -0 "$p" 2>/dev/null || fail "a client ended during the reloads: $(cat "$T"/client*.out)"
    done
    f=$(stat_of "$GW_ADMIN" forwarded)
    [ "${f:-0}" -gt "$fwd_seen" ] || return 1
    fwd_seen=$f
}
wait_for load_moved || fail "the load is not running before the reloads"
fwd_before=$fwd_seen

# routes_are K: both routes of the running table have priority K.
routes_are() {
    local r
    r=$("$CWCTL" --admin "$GW_ADMIN" routes --json) || return 1
    printf '%s' "$r" | grep -qF "{\"dest\":\"$srv_ucx\",\"nexthop\":\"ucx0\",\"kind\":\"via\",\"priority\":$1," &&
        printf '%s' "$r" | grep -qF "{\"dest\":\"$srv_tcp\",\"nexthop\":\"tcp0\",\"kind\":\"via\",\"priority\":$1,"
}
# counters_are OK FAILED: status shows OK applied and FAILED refused reloads.
counters_are() {
    "$CWCTL" --admin "$GW_ADMIN" status --json | grep -q "\"reloads\":$1,\"reload_failures\":$2,"
}

valid=0 invalid=0 by_cwctl=0 by_hup=0 routes_checked=0 moved=0
for ((i = 1; i <= RELOADS; i++)); do
    if ((i % 2 == 1)); then
        k=$((valid + 1))
        soak_cfg "$T/gw.yaml" "$k"
    else
        k=$valid
        # Were it applied, the routes would show 1000 + k.
        soak_cfg "$T/gw.yaml" $((1000 + k)) "$(bad_extra $((i / 2)))"
    fi
    if (((i - 1) / 2 % 2 == 0)); then
        by_cwctl=$((by_cwctl + 1))
        "$CWCTL" --admin "$GW_ADMIN" reload >"$T/reload.out" 2>&1
        rc=$?
        if ((i % 2 == 1)); then
            [ $rc = 0 ] || fail "reload $i (valid, cwctl): exit $rc: $(cat "$T/reload.out")"
        else
            [ $rc = 1 ] && grep -q "old table kept" "$T/reload.out" ||
                fail "reload $i (invalid: ${bad_what[$((i / 2 % 4))]}, cwctl): exit $rc: $(cat "$T/reload.out")"
        fi
    else
        by_hup=$((by_hup + 1))
        kill -HUP "$gw_PID"
    fi
    if ((i % 2 == 1)); then valid=$((valid + 1)); else invalid=$((invalid + 1)); fi
    wait_for counters_are "$valid" "$invalid" ||
        fail "reload $i: status should show $valid applied, $invalid refused: $("$CWCTL" --admin "$GW_ADMIN" status --json)"
    routes_are "$k" ||
        fail "reload $i ($( ((i % 2)) && echo valid || echo invalid)): routes should have priority $k: $("$CWCTL" --admin "$GW_ADMIN" routes --json)"
    routes_checked=$((routes_checked + 1))
    wait_for load_moved || fail "the load did not move after reload $i"
    moved=$((moved + 1))
done
reload_ms=$((($(date +%s%N) - t0) / 1000000))
fwd_during=$((fwd_seen - fwd_before))
touch "$stop_file"
soak_wait_clients
wait_for sh -c "'$CWCTL' --admin '$GW_ADMIN' stats --json | grep -q '\"inflight\":0,'" ||
    fail "the gateway still has RPCs in flight after the clients ended"
gws=$("$CWCTL" --admin "$GW_ADMIN" stats --json)
refused_logged=$(grep -c "reload failed, keeping the current table" "$T/gw.log")
soak_stop_servers
gw_stop_clean gw

result=PASS
[ -z "$CLIENTS_BAD" ] && [ "$SUM_failed" = 0 ] && [ "$SUM_unanswered" = 0 ] &&
    [ "$SUM_lost" = 0 ] && [ "$SUM_dup" = 0 ] && [ "$SUM_corrupt" = 0 ] &&
    [ "$SRV_rpcs" = "$SUM_sent" ] && [ "$SRV_dup" = 0 ] && [ "$SRV_corrupt" = 0 ] &&
    [ "$SRV_bulk_corrupt" = 0 ] && [ "$SRV_bulk_failed" = 0 ] || result=FAIL
cat <<EOF

Reloads under load, $started, $(uname -n), $(nproc) CPUs
  RELOADS=$RELOADS CLIENTS=$CLIENTS INFLIGHT=$INFLIGHT BULK_BYTES=$BULK_BYTES BULK_MIN=$BULK_MIN BULK_MAX=$BULK_MAX GW_THREADS=$GW_THREADS
| figure                                        | value |
|-----------------------------------------------|-------|
| reloads: valid applied / invalid refused      | $valid / $invalid |
| ... by cwctl reload / by SIGHUP               | $by_cwctl / $by_hup |
| routes checked after each (priority k)        | $routes_checked of $RELOADS |
| load moved between reloads                    | $moved of $RELOADS |
| time of the reloads                           | $((reload_ms / 1000)) s |
| RPCs forwarded during the reloads             | $fwd_during |
| RPCs sent (incl. bulk) / completed CW_OK      | $SUM_sent / $SUM_ok |
| bulk transfers / bytes checked                | $SUM_bulk / $SUM_bulk_bytes ($(human "$SUM_bulk_bytes")) |
| failed / unanswered / lost / dup / corrupted  | $SUM_failed / $SUM_unanswered / $SUM_lost / $((SUM_dup + SRV_dup)) / $((SUM_corrupt + SRV_corrupt + SRV_bulk_corrupt)) |
| gateway: failed / timed out / busy            | $(json_num "$gws" failed) / $(json_num "$gws" timedout) / $(json_num "$gws" busy) |
| gateway log lines about refused reloads       | $refused_logged |
| result                                        | $result |
EOF
[ "$result" = PASS ] || fail "reloads: $CLIENTS_BAD failed $SUM_failed, lost $SUM_lost, corrupt $SUM_corrupt"
pass "reloads under load: $valid valid applied, $invalid invalid refused with the old table kept; $SUM_sent RPCs, none failed"
