#!/bin/bash
# Every pair of plugins available here as ingress/egress of one gateway:
# echo RPCs of 0 B to 64 KiB through "target@gateway", verified.  A fabric
# is left out only when cw-info says its plugin or protocol is absent here
# (and the test then exits 77); one that is here and fails, fails.
. "$(dirname "$0")/gw_lib.sh"

declare -A LISTEN=(
    [shm]="shm://$TAG-gw"
    [ofi_tcp]="ofi+tcp://127.0.0.1:0"
    [ofi_shm]="ofi+shm://"
    [ucx_tcp]="ucx+tcp://127.0.0.1:0"
)
declare -A SERVE=(
    [shm]="shm://$TAG-echo"
    [ofi_tcp]="ofi+tcp://127.0.0.1:0"
    [ofi_shm]="ofi+shm://"
    [ucx_tcp]="ucx+tcp://127.0.0.1:0"
)
kinds=""
for k in shm ofi_tcp ofi_shm ucx_tcp; do
    if fabric_here "${SERVE[$k]}"; then
        kinds="$kinds $k"
    else
        skip_case "pairs with $k" "${SERVE[$k]} absent here ($FABRIC_WHY)"
    fi
done
set -- $kinds
[ $# -ge 2 ] || { echo "SKIP: fewer than two fabrics here:${kinds:- none}"; exit 77; }
npairs=$(($# * ($# - 1)))

{
    echo "gateway: { name: matrix, admin: \"127.0.0.1:$(free_port)\" }"
    echo "networks:"
    for k in $kinds; do
        echo "  - { name: $k, address: \"${LISTEN[$k]}\" }"
    done
} >"$T/gw.yaml"
start_gw gw "$T/gw.yaml"
for k in $kinds; do
    start_echo "echo_$k" "${SERVE[$k]}"
done

for in in $kinds; do
    for out in $kinds; do
        [ "$in" = "$out" ] && continue
        eval "gw_in=\$gw_$in"
        eval "target=\$echo_$out"
        # Sizes around the eager limits too (na-shm 8 KiB with the header),
        # so requests and responses overflow on one side and not the other.
        ping_expect "$in -> $out" CW_OK -c 26 -n 2 \
            -s 0,1,64,4095,4096,8120,8130,8140,8192,16370,16390,32768,65536 \
            "$target@$gw_in"
    done
done
stats=$("$CWCTL" --admin "$gw_admin" stats --json) || fail "cwctl stats"
[ "$(json_num "$stats" forwarded)" = $((26 * npairs)) ] ||
    fail "gateway counted $(json_num "$stats" forwarded) forwarded, expected $((26 * npairs))"
pass "gateway counters: $((26 * npairs)) forwarded over $npairs pairs"
stop_pid "$gw_PID"
[ "$STOP_RC" = 0 ] || fail "gateway did not exit 0 on SIGTERM"
pass "gateway drained and exited 0"
