#!/bin/bash
# 1 GiB through a gateway, pulled and pushed, checksummed, while the
# gateway's memory stays bounded by its staging pool (issue 7):
#   client -[ofi+tcp]-> gw (64 MiB staging, 1 MiB chunks) -[shm]-> server
# The gateway's peak RSS (VmHWM) may grow by at most the staging pool plus
# a fixed allowance (GWBIG_SLACK_KB, default 48 MiB: allocator arenas,
# provider buffers, sanitizer bookkeeping) over the 2 GiB that cross it.
. "$(dirname "$0")/gw_lib.sh"
. "$(dirname "$0")/gw_bulk_lib.sh"
SIZE=${GWBIG_SIZE:-1G}
STAGING_KB=65536
SLACK_KB=${GWBIG_SLACK_KB:-49152}

bulk_srv shmsrv "shm://$TAG-srv"
bulk_gw gw "tcp0=ofi+tcp://127.0.0.1:0 shm0=shm://$TAG-gw" "1MiB 8 64MiB"
# One small transfer first, so the baseline includes what any transfer
# sets up (registrations, connections).
xfer "warm-up through the gateway" "$shmsrv@$gw_tcp0" "1048576"
before=$(awk '/VmHWM/{print $2}' "/proc/$gw_PID/status")
xfer "$SIZE pulled and pushed through the gateway, checksummed" \
    "$shmsrv@$gw_tcp0" "$SIZE"
after=$(awk '/VmHWM/{print $2}' "/proc/$gw_PID/status")
grow=$((after - before))
echo "# gateway VmHWM ${before} kB -> ${after} kB (+${grow} kB) for $SIZE each way"
[ "$grow" -le $((STAGING_KB + SLACK_KB)) ] ||
    fail "gateway peak RSS grew by $grow kB (staging $STAGING_KB kB + $SLACK_KB kB allowed)"
pass "gateway peak RSS grew by $grow kB, within staging + $SLACK_KB kB"
gw_stop_clean gw
