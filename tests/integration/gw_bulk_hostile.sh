#!/bin/bash
# Proxy tokens are checked on every use (docs/bulk-gateway.md):
#   client -[ofi+tcp]-> gw -[shm]-> server
# The server abuses the token it received: forged, out of bounds, push on
# a read-only handle, presented from another endpoint, in a malformed
# delegation, reused after its RPC completed, used after its RPC's
# deadline; each is refused with its status and counted.
. "$(dirname "$0")/gw_lib.sh"
. "$(dirname "$0")/gw_bulk_lib.sh"

bulk_srv srv "shm://$TAG-srv" "shm://$TAG-alt"
bulk_gw gw "tcp0=ofi+tcp://127.0.0.1:0 shm0=shm://$TAG-gw" "64KiB 4 1MiB" \
    "127.0.0.1:$(free_port)"
timeout 60 "$XFER" hostile "$srv@$gw_tcp0" - >"$T/out" 2>"$T/client.log"
rc=$?
cat "$T/out"
[ $rc = 0 ] || fail "hostile cases (rc $rc)"
kill -0 "$gw_PID" || fail "gateway died"
xfer "gateway still serves transfers after the hostile cases" \
    "$srv@$gw_tcp0" 1M

stats=$("$CWCTL" --admin "$gw_admin" stats --json) || fail "cwctl stats"
bad=$(json_num "$stats" rejected_bad_handle)
exp=$(json_num "$stats" rejected_expired)
# forged, other peer, revoked, and the expired one (bad handle or expired).
[ "$((bad + exp))" = 4 ] && [ "$exp" -le 1 ] &&
    [ "$(json_num "$stats" rejected_range)" = 1 ] &&
    [ "$(json_num "$stats" rejected_permission)" = 1 ] &&
    [ "$(json_num "$stats" rejected_malformed)" = 1 ] &&
    [ "$(json_num "$stats" staging_free)" = "$(json_num "$stats" staging_chunks)" ] ||
    fail "bulk counters: $stats"
pass "rejections counted ($bad bad handle, $exp expired, 1 range, 1 permission, 1 malformed), staging all free"
gw_stop_clean gw
