#!/bin/bash
# Failures during a transfer through a gateway (docs/bulk-gateway.md):
#   client -[ofi+tcp]-> gw -[shm]-> server
# with a deliberately slow pipeline (4 KiB chunks, depth 1) so a 256 MiB
# pull lasts seconds.  Each party is killed mid-way; the origin's RPC ends
# with an error within its deadline, the gateway keeps serving, and every
# staging chunk is back in the pool when it stops (it logs the count).
# A cancel at the origin stops the pipeline too.
. "$(dirname "$0")/gw_lib.sh"
XFER=$4
BIG=${GWBULK_HOLD:-256M}

start_srv() {
    rm -f "$T/srv.addr"
    "$XFER" serve "shm://$TAG-srv$1" "$T/srv.addr" 2>"$T/srv$1.log" &
    SRV_PID=$!
    PIDS="$PIDS $!"
    wait_for test -s "$T/srv.addr" || fail "server did not start"
    srv=$(cat "$T/srv.addr")
}

write_gw() {
    cat >"$T/gw.yaml" <<YAML
gateway: { name: gw, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:$1" }
  - { name: shm0, address: "shm://$TAG-gw" }
buffers: { chunk: 4KiB, depth: 1, staging: 1MiB }
limits: { max_bulk_bytes_inflight: 1MiB }
YAML
}

still_serves() { # WHAT
    timeout 60 "$XFER" run "$srv@$gw_tcp0" 1,65536,1048579 >"$T/out" 2>&1 ||
        fail "gateway does not serve transfers after $1: $(cat "$T/out")"
    kill -0 "$gw_PID" || fail "gateway died after $1"
    pass "gateway serves checked transfers after $1"
}

port=$(free_port)
write_gw "$port"
start_srv 1
start_gw gw "$T/gw.yaml"

# 1. The target dies mid-transfer.
timeout 60 "$XFER" hold "$srv@$gw_tcp0" "$BIG" >"$T/hold.out" 2>"$T/hold.err" &
hp=$!
sleep 1
kill -KILL "$SRV_PID"
wait "$hp"
read -r st ms <"$T/hold.out"
[ -n "$st" ] && [ "$st" != CW_OK ] && [ "$ms" -lt 25000 ] ||
    fail "target killed: origin got '$st' after ${ms:-?} ms"
pass "target killed mid-transfer: origin's RPC ended $st after $ms ms"
start_srv 2
still_serves "the target died"

# 2. The origin dies mid-transfer (no timeout wrapper: kill the client).
"$XFER" hold "$srv@$gw_tcp0" "$BIG" >"$T/hold.out" 2>"$T/hold.err" &
hp=$!
sleep 1
kill -KILL "$hp"
wait "$hp" 2>/dev/null
sleep 0.5
still_serves "the origin died"

# 3. A cancel at the origin stops the pipeline.
timeout 60 "$XFER" cancel "$srv@$gw_tcp0" "$BIG" 300 >"$T/cancel.out" 2>&1 ||
    fail "cancel: $(cat "$T/cancel.out")"
pass "cancel at the origin: $(cat "$T/cancel.out") (status, ms after cancel)"
still_serves "a cancel"

# Every staging chunk came back: the gateway says so when it stops.
stop_pid "$gw_PID"
grep -q "staging chunks not returned" "$T/gw.log" &&
    fail "staging leaked: $(grep 'not returned' "$T/gw.log")"
# The interrupted transfers (target died, origin died, cancel) did not
# complete: only the 18 of still_serves did.  (A cancel that reaches the
# gateway before the target's delegation is refused as a revoked token.)
grep -q "gw: bulk: .* 18 transfers" "$T/gw.log" ||
    fail "bulk summary at exit: $(grep 'gw: bulk:' "$T/gw.log")"
pass "every staging chunk returned to the pool ($(grep -o 'bulk: .*waits' "$T/gw.log"))"
start_gw gw "$T/gw.yaml"

# 4. The gateway dies mid-transfer.
timeout 60 "$XFER" hold "$srv@$gw_tcp0" "$BIG" >"$T/hold.out" 2>"$T/hold.err" &
hp=$!
sleep 1
kill -KILL "$gw_PID"
wait "$hp"
read -r st ms <"$T/hold.out"
[ -n "$st" ] && [ "$st" != CW_OK ] && [ "$ms" -lt 25000 ] ||
    fail "gateway killed: origin got '$st' after ${ms:-?} ms"
pass "gateway killed mid-transfer: origin's RPC ended $st after $ms ms"
kill -0 "$SRV_PID" || fail "the target died with the gateway"
pass "the target survives the gateway's death"
