#!/bin/bash
# Same-family zero-staging through a gateway (docs/bulk-gateway.md,
# "Zero-staging"), pulled and pushed, checksummed, on multi-segment
# handles at both ends:
#   1. client -[shm]-> gw -[shm]-> server: every delegation is answered
#      with a grant and the server copies straight from/to the client
#      (direct_transfers counted; no pipelined transfer, no staging chunk
#      ever handed out).
#   2. the same with buffers.zero_copy false: the pipeline does it; after
#      a reload to true, grants again.
#   3. client -[shm]-> gw -[ofi+tcp]-> server and the reverse: different
#      families, pipelined, no grant.
#   4. hostile tokens on the direct path (forged, out of range, push on a
#      read-only handle, another peer, revoked, expired) are refused and
#      counted before any grant; the legitimate one gets a grant.
#   5. two gateways shm -> shm -> ofi+tcp: the first grants the second's
#      chunk transfers, the second stages.
# Sizes 1 B .. GWBULK_MAX (default 64M; 16M when CW_ASAN=1 is set).
. "$(dirname "$0")/gw_lib.sh"
. "$(dirname "$0")/gw_bulk_lib.sh"
MAX=${GWBULK_MAX:-64M}
[ "${CW_ASAN:-0}" = 1 ] && MAX=${GWBULK_MAX:-16M}
SIZES="1,4095,65536,1048579,$MAX"
NSIZES=5
TCP=ofi+tcp://127.0.0.1:0

# stats_of GW: its bulk counters as JSON in $stats.
stats_of() {
    eval "stats=\$(\"\$CWCTL\" --admin \"\${${1}_admin}\" stats --json)" ||
        fail "cwctl stats of $1"
}

bulk_srv shmsrv "shm://$TAG-srv" "shm://$TAG-alt"
bulk_gw gwd "shm0=shm://$TAG-gwd" "1MiB 4 8MiB" "127.0.0.1:$(free_port)"
xfer "shm <-> shm through a gateway, zero-staging" "$shmsrv@$gwd_shm0" "$SIZES"
stats_of gwd
[ "$(json_num "$stats" direct_transfers)" = $((2 * NSIZES)) ] &&
    [ "$(json_num "$stats" transfers)" = 0 ] &&
    [ "$(json_num "$stats" failed)" = 0 ] &&
    [ "$(json_num "$stats" staging_uses)" = 0 ] ||
    fail "zero-staging counters: $stats"
pass "$((2 * NSIZES)) direct transfers ($(json_num "$stats" direct_bytes) bytes), no staging chunk used"

# An idempotent call asks for a grant too (no resumable windows needed:
# the bytes never pass through the gateway).
for d in pull push; do
    timeout 60 "$XFER" once "$shmsrv@$gwd_shm0" 8M "$d" idem 20000 \
        >"$T/once.out" 2>"$T/once.err"
    grep -q '^CW_OK' "$T/once.out" ||
        fail "idempotent $d through the zero-staging gateway: $(cat "$T/once.out" "$T/once.err")"
done
stats_of gwd
[ "$(json_num "$stats" direct_transfers)" = $((2 * NSIZES + 2)) ] &&
    [ "$(json_num "$stats" transfers)" = 0 ] ||
    fail "idempotent calls were not granted: $stats"
pass "idempotent 8 MiB pull and push: granted, no staging"

bulk_gw gwp "shm0=shm://$TAG-gwp" "1MiB 4 8MiB false" "127.0.0.1:$(free_port)"
xfer "shm <-> shm through a gateway, zero_copy false" "$shmsrv@$gwp_shm0" "$SIZES"
stats_of gwp
[ "$(json_num "$stats" direct_transfers)" = 0 ] &&
    [ "$(json_num "$stats" transfers)" = $((2 * NSIZES)) ] &&
    [ "$(json_num "$stats" staging_uses)" -gt 0 ] ||
    fail "zero_copy false counters: $stats"
pass "zero_copy false: $((2 * NSIZES)) pipelined transfers, $(json_num "$stats" staging_uses) staging chunks used"

# buffers.zero_copy may change on reload.
sed -i 's/zero_copy: false/zero_copy: true/' "$T/gwp.yaml"
"$CWCTL" --admin "$gwp_admin" reload >"$T/reload.out" 2>&1 ||
    fail "reload with zero_copy true: $(cat "$T/reload.out")"
xfer "shm <-> shm after a reload to zero_copy true" "$shmsrv@$gwp_shm0" 1048579
stats_of gwp
[ "$(json_num "$stats" direct_transfers)" = 2 ] &&
    [ "$(json_num "$stats" transfers)" = $((2 * NSIZES)) ] ||
    fail "zero_copy true after reload: $stats"
pass "reload to zero_copy true: the next transfers are direct"

bulk_srv tcpsrv "$TCP"
bulk_gw gwm "tcp0=$TCP shm0=shm://$TAG-gwm" "1MiB 4 8MiB" "127.0.0.1:$(free_port)"
xfer "shm -> ofi+tcp through a gateway (zero_copy on)" "$tcpsrv@$gwm_shm0" "1,1048579"
xfer "ofi+tcp -> shm through a gateway (zero_copy on)" "$shmsrv@$gwm_tcp0" "1,1048579"
stats_of gwm
[ "$(json_num "$stats" direct_transfers)" = 0 ] &&
    [ "$(json_num "$stats" transfers)" = 8 ] ||
    fail "mixed families counters: $stats"
pass "different families: 8 pipelined transfers, no grant"

# Hostile tokens on the direct path (the server asks for grants).
timeout 60 "$XFER" hostile "$shmsrv@$gwd_shm0" - >"$T/out" 2>"$T/client.log"
rc=$?
sed "s/^/    /" "$T/out"
[ $rc = 0 ] || fail "hostile cases on the direct path (rc $rc)"
grep -q "^ok - legitimate use answered with a grant" "$T/out" ||
    fail "the legitimate delegation was not granted"
stats_of gwd
bad=$(json_num "$stats" rejected_bad_handle)
exp=$(json_num "$stats" rejected_expired)
[ "$((bad + exp))" = 4 ] && [ "$exp" -le 1 ] &&
    [ "$(json_num "$stats" rejected_range)" = 1 ] &&
    [ "$(json_num "$stats" rejected_permission)" = 1 ] &&
    [ "$(json_num "$stats" staging_uses)" = 0 ] ||
    fail "hostile counters on the direct path: $stats"
pass "direct path: rejections counted ($bad bad handle, $exp expired, 1 range, 1 permission), staging untouched"
# Two gateways, shm -> shm -> ofi+tcp: the second one's pipeline fetches
# (pull) or writes (push) each chunk at the client with a grant from the
# first, which stages nothing.
stats_of gwd
d0=$(json_num "$stats" direct_transfers)
stats_of gwm
t0=$(json_num "$stats" transfers)
xfer "two gateways shm -> shm -> ofi+tcp" "$tcpsrv@$gwm_shm0@$gwd_shm0" \
    "1,1048579,$MAX"
stats_of gwd
d1=$(json_num "$stats" direct_transfers)
[ "$d1" -gt "$d0" ] && [ "$(json_num "$stats" transfers)" = 0 ] &&
    [ "$(json_num "$stats" staging_uses)" = 0 ] ||
    fail "first gateway of the chain: $stats"
stats_of gwm
[ "$(json_num "$stats" transfers)" = $((t0 + 6)) ] &&
    [ "$(json_num "$stats" direct_transfers)" = 0 ] ||
    fail "second gateway of the chain: $stats"
pass "chain: first gateway granted $((d1 - d0)) chunk transfers, second pipelined 6"
gw_stop_clean gwd gwp gwm
