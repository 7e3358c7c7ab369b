#!/bin/bash
# Causeway on real RDMA hardware: the check an operator runs on a machine
# with an InfiniBand or RoCE HCA, and sends back the report it prints.
#
#   tests/hw/verbs-check.sh [BUILD_DIR]        (default: ./build)
#
# BUILD_DIR is a Causeway build with -Dverbs=enabled -Dofi=enabled and
# the tests (meson setup build -Dtests=enabled ...; ninja -C build).
# Environment (optional): VERBS_DEV, VERBS_PORT, VERBS_IP choose the HCA,
# port and IPv4 address (default: the first active port and an address of
# its network interface); VERBS_CHECK_REPORT names the report file
# (default: verbs-check-report.txt in the current directory).
#
# What it runs, each step recorded as PASS, FAIL or SKIP (with why):
#   devices      ibv_devinfo (devices, ports, state, link layer, MTU)
#   real         unit-verbs-real: message, get, put over verbs://
#   conformance  the conformance suite over verbs://DEV:PORT/IP:0 and
#                over ofi+verbs://
#   multiproc    the multi-process RPC/bulk tests over verbs://
#   perf         cw-perf latency and bandwidth over verbs://, next to
#                perftest's ib_send_lat and ib_read_bw when installed
#   gateway      a gateway bridging verbs <-> ofi+tcp (verbs-gw-bridge.sh)
# Exit status: 0 if nothing failed, 1 if a step failed, 77 if this
# machine has no RDMA device (nothing can be checked).
set -u

here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
B=$(cd "${1:-$top/build}" 2>/dev/null && pwd) || {
    echo "verbs-check: no build directory ${1:-$top/build}" >&2
    exit 2
}
SYS=/sys/class/infiniband

devs=$(ls "$SYS" 2>/dev/null)
if [ -z "$devs" ]; then
    echo "SKIP: no RDMA device on $(hostname): $SYS is empty or absent" \
        "(no HCA, or its driver (mlx5_ib, irdma, bnxt_re, ...) is not loaded," \
        "or no Soft-RoCE/siw link is configured); nothing to check"
    exit 77
fi
for t in test_conformance test_rpc_multiproc test_verbs_real; do
    if ! find "$B/tests" -name "$t" -type f -perm -u+x | grep -q .; then
        echo "verbs-check: $B has no tests/.../$t: build with -Dtests=enabled -Dverbs=enabled" >&2
        exit 2
    fi
done

T=$(mktemp -d /tmp/cw-verbs-check.XXXXXX)
REPORT=${VERBS_CHECK_REPORT:-$PWD/verbs-check-report.txt}
BG=""
cleanup() {
    local p
    for p in $BG; do
        kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
    done
    rm -rf "$T"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The plugins of this build, never a fake device.
unset CAUSEWAY_VERBS_FAKE
export CAUSEWAY_PLUGIN_PATH="$B/na-verbs:$B/na-ofi:$B/na-ucx:$B/na-shm"
export CW_TEST_PLUGINS=verbs,ofi
export RDMAV_FORK_SAFE=1 # the tests fork after registering memory

: >"$REPORT"
say() { echo "$*" | tee -a "$REPORT"; }
RESULTS=""
FAILED=0

# step NAME SECONDS CMD...: run CMD with a time limit, its output in
# $T/NAME.log; exit 0 PASS, 77 SKIP, anything else FAIL (last lines go to
# the report).
step() {
    local name=$1 secs=$2 rc t0 t1 why
    shift 2
    say "--- $name: $*"
    t0=$(date +%s)
    timeout "$secs" "$@" >"$T/$name.log" 2>&1
    rc=$?
    t1=$(date +%s)
    case $rc in
    0) RESULTS="$RESULTS|PASS $name ($((t1 - t0)) s)" ;;
    77)
        why=$(grep -m1 -iE 'skip|absent|no .*device' "$T/$name.log")
        RESULTS="$RESULTS|SKIP $name: ${why:-exit 77}"
        ;;
    124) RESULTS="$RESULTS|FAIL $name: timed out after $secs s"; FAILED=1 ;;
    *) RESULTS="$RESULTS|FAIL $name: exit $rc"; FAILED=1 ;;
    esac
    if [ "$rc" = 0 ] || [ "$rc" = 77 ]; then
        grep -E '^(ok|not ok|#|\[  PASSED|\[  SKIPPED)' "$T/$name.log" | tail -n 40 | tee -a "$REPORT"
    else
        tail -n 60 "$T/$name.log" | tee -a "$REPORT"
    fi
}

# wait_file FILE PID: bounded wait (30 s) for a server's address file.
wait_file() {
    local n
    for ((n = 600; n > 0; n--)); do
        [ -s "$1" ] && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.05 # sleep-ok: the poll interval of a bounded wait
    done
    return 1
}

say "=== Causeway verbs hardware check ==="
say "host: $(hostname)   kernel: $(uname -r)   date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
say "causeway: $(git -C "$top" describe --always --dirty 2>/dev/null || echo unknown)   build: $B"
say "rdma-core: $(dpkg-query -W -f='${Version}' libibverbs1 2>/dev/null || rpm -q --qf '%{VERSION}' libibverbs 2>/dev/null || echo unknown)"
say "libfabric: $(fi_info --version 2>/dev/null | head -n 1 || echo unknown)"

# Device, port and address to use.
DEV=${VERBS_DEV:-}
PORT=${VERBS_PORT:-}
if [ -z "$DEV" ]; then
    for d in $devs; do
        for p in $(ls "$SYS/$d/ports" 2>/dev/null); do
            if grep -q ACTIVE "$SYS/$d/ports/$p/state" 2>/dev/null; then
                DEV=$d
                PORT=$p
                break 2
            fi
        done
    done
fi
PORT=${PORT:-1}
if [ -z "$DEV" ]; then
    say "devices: $devs, but no port is ACTIVE:"
    for d in $devs; do
        for p in $(ls "$SYS/$d/ports" 2>/dev/null); do
            say "  $d:$p $(cat "$SYS/$d/ports/$p/state" 2>/dev/null) $(cat "$SYS/$d/ports/$p/link_layer" 2>/dev/null)"
        done
    done
    say "RESULT: FAIL (no active port: check cabling, the subnet manager (IB) or the link (RoCE))"
    exit 1
fi
LL=$(cat "$SYS/$DEV/ports/$PORT/link_layer" 2>/dev/null)
NETDEV=$(cat "$SYS/$DEV/ports/$PORT/gid_attrs/ndevs/0" 2>/dev/null)
[ -n "$NETDEV" ] || NETDEV=$(ls "$SYS/$DEV/device/net" 2>/dev/null | head -n 1)
IP=${VERBS_IP:-}
if [ -z "$IP" ] && [ -n "$NETDEV" ]; then
    IP=$(ip -4 -o addr show dev "$NETDEV" 2>/dev/null | awk '{print $4}' | cut -d/ -f1 | head -n 1)
fi
say "using: $DEV port $PORT ($LL), netdev ${NETDEV:-?}, IPv4 ${IP:-none}"

if command -v ibv_devinfo >/dev/null; then
    step devices 30 ibv_devinfo -v
    grep -E 'hca_id|transport|fw_ver|port:|state|max_mtu|active_mtu|link_layer|max_qp_wr|max_srq_wr|max_cqe|max_qp_rd_atom' \
        "$T/devices.log" | sed 's/^[[:space:]]*/  /' >>"$REPORT"
else
    RESULTS="$RESULTS|SKIP devices: ibv_devinfo not installed (ibverbs-utils)"
fi

if [ -z "$IP" ]; then
    say "no IPv4 address on ${NETDEV:-the interface of the port}: set VERBS_IP; the rdma_cm steps need one"
    RESULTS="$RESULTS|FAIL address: no IPv4 address for $DEV:$PORT"
    FAILED=1
else
    URI="verbs://$DEV:$PORT/$IP"
    step real 120 "$(find "$B/tests" -name test_verbs_real -type f | head -n 1)"
    CONF=$(find "$B/tests" -name test_conformance -type f | head -n 1)
    step conformance-verbs 300 "$CONF" "$URI:0"
    step conformance-ofi-verbs 300 env CW_TEST_NEEDS_HW=1 "$CONF" "ofi+verbs://"
    step multiproc-verbs 600 "$(find "$B/tests" -name test_rpc_multiproc -type f | head -n 1)" "$URI:0"

    # cw-perf over verbs.
    PERF=$B/tools/cw-perf
    "$PERF" server --listen "$URI:0" --addr-file "$T/perf.addr" 2>"$T/perf-server.log" &
    BG="$BG $!"
    if wait_file "$T/perf.addr" "$!"; then
        target=$(cat "$T/perf.addr")
        step cw-perf-lat 300 "$PERF" client --target "$target" --test lat \
            --sizes 0,8,64,1K,4K,8K --iters 20000 --reps 3 --csv
        cat "$T/cw-perf-lat.log" >>"$REPORT"
        step cw-perf-bw 300 "$PERF" client --target "$target" --test bw \
            --sizes 64K,1M,4M,16M --time 2 --reps 3 --csv
        cat "$T/cw-perf-bw.log" >>"$REPORT"
        timeout 30 "$PERF" quit --target "$target" >/dev/null 2>&1
    else
        RESULTS="$RESULTS|FAIL cw-perf: server on $URI:0 did not start: $(tail -n 3 "$T/perf-server.log")"
        FAILED=1
    fi

    # perftest next to it, over rdma_cm (-R) on the same address.
    for pt in ib_send_lat ib_read_bw; do
        if ! command -v $pt >/dev/null; then
            RESULTS="$RESULTS|SKIP $pt: not installed (perftest)"
            continue
        fi
        args="-d $DEV -i $PORT -R -F"
        [ $pt = ib_read_bw ] && args="$args -a" || args="$args -a -n 20000"
        $pt $args >"$T/$pt-server.log" 2>&1 &
        srv=$!
        BG="$BG $srv"
        # The client retries until the server listens (bounded).
        ok=0
        for ((n = 0; n < 100; n++)); do
            if timeout 300 $pt $args "$IP" >"$T/$pt.log" 2>&1; then
                ok=1
                break
            fi
            kill -0 "$srv" 2>/dev/null || break
            sleep 0.1 # sleep-ok: retry interval while the server comes up
        done
        if [ $ok = 1 ]; then
            RESULTS="$RESULTS|PASS $pt"
        else
            RESULTS="$RESULTS|FAIL $pt: $(tail -n 2 "$T/$pt.log" | tr '\n' ' ')"
            FAILED=1
        fi
        say "--- $pt $args $IP"
        cat "$T/$pt.log" >>"$REPORT"
        kill "$srv" 2>/dev/null
        wait "$srv" 2>/dev/null
    done

    step gateway-verbs-ofi-tcp 300 env VERBS_URI="$URI" bash "$here/verbs-gw-bridge.sh" \
        "$B/gateway/causewayd" "$B/tools/cw-ping" "$B/tools/cwctl"
fi

say ""
say "=== summary ==="
echo "$RESULTS" | tr '|' '\n' | sed '/^$/d' | tee -a "$REPORT"
if [ $FAILED = 0 ]; then
    say "RESULT: PASS"
else
    say "RESULT: FAIL"
fi
say "report: $REPORT (please send it back)"
exit $FAILED
