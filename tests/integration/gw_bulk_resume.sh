#!/bin/bash
# Chunk-level resume (docs/bulk-gateway.md, "Resume"):
#   client -[shm]-> front -[ofi+tcp]-> gwa | gwb -[ucx+tcp]-> server
# A 64 MiB checksummed pull, then a push, marked idempotent, through slow
# pipelines (4 KiB chunks, depth 1); the gateway carrying it is killed once
# part of it has been acknowledged.  The front re-forwards the request
# through the other gateway (RESUME) and the server continues where its
# transfer stopped: the RPC succeeds, the data is right, the handler ran
# once, and fewer bytes than the whole were delegated again.  The same
# call not marked idempotent fails at the origin within its deadline.
. "$(dirname "$0")/gw_lib.sh"
. "$(dirname "$0")/gw_bulk_lib.sh"
SIZE=${GWRESUME_SIZE:-64M}
TOTAL=$((${SIZE%M} * 1048576))
SLOW="4KiB 1 1MiB"
TMO=60000

pa=$(free_port)
pb=$(free_port)
# gw NAME PORT: (re)start gateway NAME on its fixed ofi+tcp port.
gw() {
    bulk_gw "$1" "tcp0=ofi+tcp://127.0.0.1:$2 ucx0=ucx+tcp://127.0.0.1:0" \
        "$SLOW" "127.0.0.1:$(free_port)"
}
stat_of() { # ADMIN KEY: a number from `cwctl stats --json` (first match)
    "$CWCTL" --admin "$1" stats --json 2>/dev/null |
        grep -o "\"$2\":[0-9]*" | head -n 1 | cut -d: -f2
}

bulk_srv srv "ucx+tcp://127.0.0.1:0"
gw gwa "$pa"
gw gwb "$pb"
cat >"$T/front.yaml" <<YAML
gateway: { name: front, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: shm0, address: "shm://$TAG-front" }
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
routes:
  - { dest: "ucx+tcp://*", gateway: "$gwa_tcp0" }
  - { dest: "ucx+tcp://*", gateway: "$gwb_tcp0" }
health: { interval: 300ms, timeout: 300ms, eject_after: 2, recover_after: 2 }
buffers: { chunk: 4KiB, depth: 1, staging: 1MiB }
limits: { max_bulk_bytes_inflight: 1MiB }
YAML
start_gw front "$T/front.yaml"
TARGET="$srv@$front_shm0"

# up NAME: wait until the front has gateway NAME in rotation.
up() {
    local a
    eval "a=\$${1}_tcp0"
    wait_for sh -c "'$CWCTL' --admin '$front_admin' routes --json | grep -q '\"nexthop\":\"$a\"[^}]*\"state\":\"up\"'" ||
        fail "front does not see $1 up"
}

# carrier MIN_BYTES: the gateway with a transfer running and at least
# MIN_BYTES delegated (answered) through it since the call started (base_*
# hold the counts before); sets CARRIER and CARRIED.
carrier() {
    local g adm act by base
    for _ in $(seq 1200); do
        for g in gwa gwb; do
            eval "adm=\$${g}_admin; base=\$base_$g"
            act=$(stat_of "$adm" active)
            by=$(stat_of "$adm" bytes)
            if [ "${act:-0}" -gt 0 ] && [ "$((${by:-0} - base))" -ge "$1" ]; then
                CARRIER=$g
                CARRIED=$((by - base))
                return 0
            fi
        done
        sleep 0.05
    done
    return 1
}

# once_kill OP MODE MIN_BYTES: one call in the background; kill the
# gateway carrying it after MIN_BYTES (0: one second after it started);
# reads the client's line into ST MS RUNS RESUMED RBYTES SUSP.
once_kill() {
    local op=$1 mode=$2 min=$3 cp pid
    base_gwa=$(stat_of "$gwa_admin" bytes)
    base_gwb=$(stat_of "$gwb_admin" bytes)
    timeout 120 "$XFER" once "$TARGET" "$SIZE" "$op" "$mode" "$TMO" \
        >"$T/once.out" 2>"$T/once.err" &
    cp=$!
    carrier "$min" || { kill "$cp"; fail "$op/$mode: no gateway carried the transfer"; }
    [ "$min" = 0 ] && sleep 1
    eval "pid=\$${CARRIER}_PID"
    kill -KILL "$pid"
    wait "$pid" 2>/dev/null
    wait "$cp"
    read -r ST MS RUNS RESUMED RBYTES SUSP <"$T/once.out"
    echo "    $op/$mode: killed $CARRIER after $CARRIED bytes; client: $(cat "$T/once.out")"
}

# Idempotent pull and push: resumed, not restarted.  The server's
# counters are totals: the previous call's are subtracted.
prev_rbytes=0
for op in pull push; do
    up gwa
    up gwb
    r0=$(stat_of "$front_admin" resumed)
    once_kill "$op" idem $((8 << 20))
    [ "$ST" = CW_OK ] || fail "$op/idem: $(cat "$T/once.out") $(tail -n 3 "$T/once.err")"
    [ "$RUNS" = 1 ] || fail "$op/idem: the handler ran $RUNS times"
    RBYTES=$((RBYTES - prev_rbytes))
    prev_rbytes=$((prev_rbytes + RBYTES))
    [ "$RBYTES" -gt 0 ] && [ "$RBYTES" -le $((TOTAL - CARRIED)) ] ||
        fail "$op/idem: $RBYTES bytes delegated after the resume ($CARRIED of $TOTAL before the kill)"
    r1=$(stat_of "$front_admin" resumed)
    [ "$((r1 - r0))" -ge 1 ] || fail "$op/idem: front counted no resume ($r0 -> $r1)"
    pass "$op $SIZE idempotent: $CARRIER killed after $CARRIED bytes, RPC $ST in $MS ms, handler ran once, $RBYTES of $TOTAL bytes delegated again after the resume (front resumed $((r1 - r0)))"
    gw "$CARRIER" "$([ "$CARRIER" = gwa ] && echo "$pa" || echo "$pb")"
done

# Not idempotent: an error at the origin within its deadline.
up gwa
up gwb
once_kill pull plain 0
[ "$ST" != CW_OK ] && [ "${MS:-999999}" -lt "$TMO" ] ||
    fail "pull/plain: origin got '$ST' after ${MS:-?} ms"
pass "pull $SIZE not idempotent: $CARRIER killed, origin's RPC ended $ST after $MS ms"
gw "$CARRIER" "$([ "$CARRIER" = gwa ] && echo "$pa" || echo "$pb")"

grep -q "Sanitizer\|runtime error" "$T/srv.log" &&
    fail "server: $(grep -m 3 'Sanitizer\|runtime error' "$T/srv.log")"
bulk_gw_stop front gwa gwb
