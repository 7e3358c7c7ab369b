#!/bin/bash
# Instructions per 64 B round trip (one call in flight, blocking mode) at
# a cw-perf client and at a cw-perf server, counted by valgrind's
# callgrind: the whole process is measured twice, with N1 and with N2
# calls, and the difference is divided by N2 - N1, so that start-up and
# shut-down cancel out.  Deterministic where a round trip's time on a
# 2-vCPU machine is not; it counts what the code does, including its empty
# polls (which vary a little with timing, so compare figures of one run).
#
#   [FABRICS="ofi+tcp ucx+tcp shm"] [SIDES="client server"] [N1=2000]
#   [N2=6000] [HG_BIN=DIR] [KEEP=DIR] [BY_OBJECT=1]
#   tests/bench/rtt-instr.sh [BUILD_DIR]
#
# KEEP=DIR keeps each callgrind file there (IMPL-FABRIC-SIDE-N.cg) for
# callgrind_annotate.  BY_OBJECT=1 also prints, under each row, the
# instructions per round trip of each shared object (the program, the
# library, the plugin, libfabric, UCX, libc...), the same N2 - N1
# difference: where two stacks on one fabric spend theirs.
#
# With HG_BIN (a Mercury build's bin/, docs/cw-perf.md "Against Mercury"),
# Mercury's hg_rate / hg_perf_server are measured the same way beside
# Causeway.  Mercury's server polls without sleeping, so its server figure
# counts those polls too; the client figures compare like with like.
set -u
B=$(cd "${1:-build-rel}" && pwd)
FABRICS=${FABRICS:-ofi+tcp ucx+tcp shm}
SIDES=${SIDES:-client server}
N1=${N1:-2000}
N2=${N2:-6000}
HG_BIN=${HG_BIN:-}
KEEP=${KEEP:-}
BY_OBJECT=${BY_OBJECT:-}
[ -z "$KEEP" ] || mkdir -p "$KEEP"
export CAUSEWAY_PLUGIN_PATH=$B/na-shm:$B/na-ofi:$B/na-ucx:$B/na-verbs
command -v valgrind >/dev/null || { echo "rtt-instr: valgrind is needed" >&2; exit 2; }
[ -x "$B/tools/cw-perf" ] || { echo "rtt-instr: no $B/tools/cw-perf" >&2; exit 2; }
. "$(dirname "$0")/bench_lib.sh" rttinstr
export CAUSEWAY_PLUGIN_PATH=$B/na-shm:$B/na-ofi:$B/na-ucx:$B/na-verbs
W=$T
VG=(valgrind --tool=callgrind --dump-instr=no --collect-jumps=no)

ir_of() { awk '/^(summary|totals):/ { print $2; exit }' "$1"; }

# objects CG: "OBJECT INSTRUCTIONS" lines, the file's instructions summed
# by the shared object they ran in (callgrind_annotate's [object] column).
objects() {
    callgrind_annotate --threshold=100 "$1" 2>/dev/null | awk '
        /^ *[0-9,]+ +\(/ && /\[/ {
            n = $1; gsub(",", "", n)
            o = $0; sub(/.*\[/, "", o); sub(/\].*/, "", o)
            sub(/.*\//, "", o); sub(/\.so[.0-9]*$/, ".so", o)
            s[o] += n
        }
        END { for (o in s) print o, s[o] }'
}

# by_object A.cg B.cg N: per object, (B - A) / N, largest first.
by_object() {
    join -a 1 -a 2 -e 0 -o 0,1.2,2.2 <(objects "$1" | sort) <(objects "$2" | sort) |
        awk -v n="$3" '{ d = ($3 - $2) / n; if (d >= 1) printf "    %-32s %8.0f\n", $1, d }' |
        sort -k2,2nr
}

# one IMPL FABRIC SIDE N: total instructions of SIDE's process over N calls.
one() {
    local impl=$1 fab=$2 side=$3 n=$4 sv=() cv=() na u
    rm -f "$W"/cg "$W"/addr "$W"/port.cfg
    if [ "$side" = server ]; then
        sv=("${VG[@]}" --callgrind-out-file="$W/cg")
    else
        cv=("${VG[@]}" --callgrind-out-file="$W/cg")
    fi
    if [ "$impl" = causeway ]; then
        case $fab in shm) u=shm:// ;; *) u=$fab://127.0.0.1:0 ;; esac
        "${sv[@]}" "$B/tools/cw-perf" server --listen "$u" --addr-file "$W/addr" \
            >/dev/null 2>"$W/srv.log" &
        SRV=$!
        PIDS="$PIDS $SRV"
        wait_file "$W/addr" "$SRV" 1200 || { cat "$W/srv.log" >&2; return 1; }
        timeout 600 "${cv[@]}" "$B/tools/cw-perf" client --target "$(cat "$W/addr")" \
            --test lat --sizes 64 --iters "$n" --reps 1 --verify \
            >"$W/cli.out" 2>"$W/cli.log" || { cat "$W/cli.log" >&2; return 1; }
        kill "$SRV"
    else
        case $fab in
        ofi+tcp) na="-c ofi -p tcp -H 127.0.0.1" ;;
        ucx+tcp) na="-c ucx -p tcp -H 127.0.0.1" ;;
        shm) na="-c na -p sm" ;;
        esac
        (cd "$W" && exec "${sv[@]}" "$HG_BIN/hg_perf_server" $na -f "$W/port.cfg" \
            >/dev/null 2>"$W/srv.log") &
        SRV=$!
        PIDS="$PIDS $SRV"
        wait_file "$W/port.cfg" "$SRV" 1200 || { cat "$W/srv.log" >&2; return 1; }
        (cd "$W" && exec timeout 600 "${cv[@]}" "$HG_BIN/hg_rate" $na -f "$W/port.cfg" \
            -y 64 -z 64 -x 1 -l "$n" -v) >"$W/cli.out" 2>"$W/cli.log" ||
            { cat "$W/cli.log" >&2; return 1; }
        # hg_rate shut its server down.
        for _ in $(seq 600); do
            kill -0 "$SRV" 2>/dev/null || break
            sleep 0.05 # sleep-ok: the poll interval of a bounded wait
        done
    fi
    wait "$SRV" 2>/dev/null
    SRV=""
    ir_of "$W/cg"
    [ -z "$KEEP" ] || cp "$W/cg" "$KEEP/$impl-$fab-$side-$n.cg"
    cp "$W/cg" "$W/cg-$impl-$fab-$side-$n"
}

impls=causeway
[ -n "$HG_BIN" ] && impls="causeway mercury"
printf '%-9s %-8s %-7s %12s %12s %10s\n' impl fabric side "Ir($N1)" "Ir($N2)" "Ir/rtt"
for fab in $FABRICS; do
    for side in $SIDES; do
        for impl in $impls; do
            a=$(one "$impl" "$fab" "$side" "$N1") || exit 1
            b=$(one "$impl" "$fab" "$side" "$N2") || exit 1
            printf '%-9s %-8s %-7s %12s %12s %10s\n' "$impl" "$fab" "$side" \
                "$a" "$b" $(((b - a) / (N2 - N1)))
            [ -z "$BY_OBJECT" ] ||
                by_object "$W/cg-$impl-$fab-$side-$N1" "$W/cg-$impl-$fab-$side-$N2" $((N2 - N1))
        done
    done
done
