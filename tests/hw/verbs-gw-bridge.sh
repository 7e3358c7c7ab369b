#!/bin/bash
# A gateway bridging na-verbs on a real HCA and ofi+tcp: echo RPCs of
# 0 B..1 MiB (with bulk) each way through "target@gateway", verified by
# cw-ping.  Run by tests/hw/verbs-check.sh (not by meson test: it needs
# an RDMA device).
#   verbs-gw-bridge.sh CAUSEWAYD CW_PING CWCTL   with VERBS_URI=verbs://DEV:PORT/IP
. "$(dirname "$0")/../integration/gw_lib.sh"

V=${VERBS_URI:?VERBS_URI=verbs://DEV:PORT/IP is required}
{
    echo "gateway: { name: hwbridge, admin: \"127.0.0.1:$(free_port)\" }"
    echo "networks:"
    echo "  - { name: ib, address: \"$V:0\" }"
    echo "  - { name: tcp, address: \"ofi+tcp://127.0.0.1:0\" }"
} >"$T/gw.yaml"
start_gw gw "$T/gw.yaml"
start_echo echo_v "$V:0"
start_echo echo_t "ofi+tcp://127.0.0.1:0"
ping_expect "ofi+tcp client -> gateway -> verbs server" CW_OK -c 40 -n 4 \
    -s 0,64,8192,65536,1048576 --with-bulk "$echo_v@$gw_tcp"
ping_expect "verbs client -> gateway -> ofi+tcp server" CW_OK -c 40 -n 4 \
    -s 0,64,8192,65536,1048576 --with-bulk "$echo_t@$gw_ib"
stats=$("$CWCTL" --admin "$gw_admin" stats --json) || fail "cwctl stats"
pass "gateway counters: $(json_num "$stats" forwarded) forwarded"
stop_pid "$gw_PID"
[ "$STOP_RC" = 0 ] || fail "gateway did not exit 0 on SIGTERM"
pass "gateway drained and exited 0"
