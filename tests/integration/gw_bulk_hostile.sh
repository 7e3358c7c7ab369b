#!/bin/bash
# Proxy tokens are checked on every use (docs/bulk-gateway.md):
#   client -[ofi+tcp]-> gw -[shm]-> server
# The server abuses the token it received: forged, out of bounds, push on
# a read-only handle, presented from another endpoint, reused after its
# RPC completed; each is refused with its status and counted.
. "$(dirname "$0")/gw_lib.sh"
XFER=$4

"$XFER" serve "shm://$TAG-srv" "$T/srv.addr" "shm://$TAG-alt" 2>"$T/srv.log" &
PIDS="$PIDS $!"
wait_for test -s "$T/srv.addr" || fail "server did not start"
srv=$(cat "$T/srv.addr")
cat >"$T/gw.yaml" <<YAML
gateway: { name: gw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
buffers: { chunk: 64KiB, depth: 4, staging: 1MiB }
YAML
start_gw gw "$T/gw.yaml"
timeout 60 "$XFER" hostile "$srv@$gw_tcp0" - >"$T/out" 2>"$T/client.log"
rc=$?
cat "$T/out"
[ $rc = 0 ] || fail "hostile cases (rc $rc)"
kill -0 "$gw_PID" || fail "gateway died"
timeout 60 "$XFER" run "$srv@$gw_tcp0" 1M >"$T/out" 2>>"$T/client.log" ||
    fail "transfer after the hostile cases: $(cat "$T/out")"
pass "gateway still serves transfers after the hostile cases"

stats=$("$CWCTL" --admin "$gw_admin" stats --json) || fail "cwctl stats"
[ "$(json_num "$stats" rejected_bad_handle)" = 3 ] &&
    [ "$(json_num "$stats" rejected_range)" = 1 ] &&
    [ "$(json_num "$stats" rejected_permission)" = 1 ] &&
    [ "$(json_num "$stats" staging_free)" = "$(json_num "$stats" staging_chunks)" ] ||
    fail "bulk counters: $stats"
pass "rejections counted (3 bad handle, 1 range, 1 permission), staging all free"
