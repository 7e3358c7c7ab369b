#!/bin/bash
# Bulk through gateways on proxy handles, pulled and pushed, checksummed,
# on multi-segment handles at both ends (docs/bulk-gateway.md):
#   1. client -[ofi+tcp]-> gw -[shm]-> server            (shm <-> ofi+tcp)
#   2. client -[shm]-> gw -[ofi+tcp]-> server            (the other way)
#   3. client -[ofi+tcp]-> gw -[ucx+tcp]-> server        (ofi+tcp <-> ucx+tcp)
#   4. client -[ofi+tcp]-> gw1 -[ucx+tcp]-> gw2 -[shm]-> server (two hops)
#   5. 6 concurrent transfers of 8 chunks each through a 4-chunk staging
#      pool: they wait for credits and all complete.
# Sizes 1 B .. GWBULK_MAX (default 64M; 16M when CW_ASAN=1 is set); the
# 1 GiB case is in tests/bench/gw-bulk-bench.sh.
. "$(dirname "$0")/gw_lib.sh"
XFER=$4
MAX=${GWBULK_MAX:-64M}
[ "${CW_ASAN:-0}" = 1 ] && MAX=${GWBULK_MAX:-16M}
SIZES="1,4095,65536,1048579,$MAX"

start_srv() { # NAME URI
    rm -f "$T/$1.addr"
    "$XFER" serve "$2" "$T/$1.addr" 2>"$T/$1.log" &
    PIDS="$PIDS $!"
    wait_for test -s "$T/$1.addr" || fail "server $1 ($2) did not start"
    eval "$1=\$(cat \"\$T/\$1.addr\")"
}

xfer() { # WHAT TARGET SIZES
    timeout 240 "$XFER" run "$2" "$3" >"$T/out" 2>"$T/client.log"
    local rc=$?
    sed "s/^/    /" "$T/out"
    [ $rc = 0 ] || fail "$1 (rc $rc)"
    pass "$1"
}

start_srv shmsrv "shm://$TAG-srv"
start_srv tcpsrv "ofi+tcp://127.0.0.1:0"
cat >"$T/gw.yaml" <<YAML
gateway: { name: gw, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
buffers: { chunk: 1MiB, depth: 4, staging: 8MiB }
YAML
start_gw gw "$T/gw.yaml"
xfer "shm <-> ofi+tcp through a gateway" "$shmsrv@$gw_tcp0" "$SIZES"
xfer "ofi+tcp <-> shm through a gateway" "$tcpsrv@$gw_shm0" "$SIZES"

if plugin_available "ucx+tcp://127.0.0.1:0"; then
    start_srv ucxsrv "ucx+tcp://127.0.0.1:0"
    cat >"$T/gwu.yaml" <<YAML
gateway: { name: gwu, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
buffers: { chunk: 1MiB, depth: 4, staging: 8MiB }
YAML
    start_gw gwu "$T/gwu.yaml"
    xfer "ofi+tcp <-> ucx+tcp through a gateway" "$ucxsrv@$gwu_tcp0" "$SIZES"

    cat >"$T/gw2.yaml" <<YAML
gateway: { name: gw2, admin: "" }
networks:
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw2" }
buffers: { chunk: 256KiB, depth: 4, staging: 2MiB }
YAML
    start_gw gw2 "$T/gw2.yaml"
    xfer "two gateways: ofi+tcp -> ucx+tcp -> shm" \
        "$shmsrv@$gw2_ucx0@$gwu_tcp0" "1,65536,1048579,$MAX"
else
    echo "# ucx+tcp not available here: ofi+tcp <-> ucx+tcp cases skipped"
    cat >"$T/gw2.yaml" <<YAML
gateway: { name: gw2, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw2" }
buffers: { chunk: 256KiB, depth: 4, staging: 2MiB }
YAML
    start_gw gw2 "$T/gw2.yaml"
    xfer "two gateways: ofi+tcp -> ofi+tcp -> shm" \
        "$shmsrv@$gw2_tcp0@$gw_tcp0" "1,65536,1048579,$MAX"
fi

# Credits: 4 staging chunks, depth 2, six clients of 8 chunks at once.
cat >"$T/gws.yaml" <<YAML
gateway: { name: gws, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gws" }
buffers: { chunk: 256KiB, depth: 2, staging: 1MiB }
YAML
start_gw gws "$T/gws.yaml"
cpids=""
for i in 1 2 3 4 5 6; do
    timeout 120 "$XFER" run "$shmsrv@$gws_tcp0" 2M "$i" >"$T/c$i.out" 2>&1 &
    cpids="$cpids $!"
done
n=0
for p in $cpids; do
    wait "$p" && n=$((n + 1))
done
[ $n = 6 ] || fail "concurrent transfers over a small pool: $n of 6 passed: $(cat "$T"/c*.out)"
pass "6 concurrent 2 MiB transfers through 1 MiB of staging"
