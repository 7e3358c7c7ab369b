#!/bin/bash
# Causeway against Mercury, side by side in one run (issue 33): the same
# transports, sizes and calls in flight, the two alternated round after
# round (odd rounds Causeway first, even rounds Mercury first), every
# figure printed as the median and range over the rounds with the ratio
# Causeway / Mercury.  Not part of CI: Mercury is not part of the project.
#
#   HG_BIN=/path/to/mercury/build/bin [ROUNDS=3] [ITERS=20000]
#   [BW_LOOPS=50] [TRANSPORTS="ofi+tcp ucx+tcp shm"] [ONLY=lat,rate,bw]
#   [VERIFY=1] [FLOOR=1] tests/bench/vs-mercury.sh [BUILD_DIR]
#
# HG_BIN holds hg_perf_server, hg_rate, hg_bw_read and hg_bw_write from a Mercury build
# made outside this tree (docs/cw-perf.md, "Against Mercury", says how).
# Each measurement starts its own server pinned to CPU 1, the client pinned
# to CPU 0; a Mercury client shuts its server down when it ends.
#
# Figures: 64 B round trip (one call in flight), blocking and busy, and
# 4 KiB busy (the request carries it, the answer is empty; the summary
# gives each library's 4 KiB / 64 B ratio, issue 33's third target); 64 B
# rate with 16 calls in flight; bulk bandwidth at 1, 4 and 16 MiB, one
# transfer in flight, the server pulling from the client's memory
# (cw-perf's bw --dir pull against hg_bw_write, whose server pulls) and
# pushing into it (--dir push against hg_bw_read, whose server pushes).
# Mercury's bw clients ask for 64 transfers per call into 64 regions by
# default; -w 1 makes it one, as cw-perf's.  Times: lower is better
# (ratio < 1 means Causeway is ahead); rates and bandwidths: higher is
# better (ratio > 1).
#
# FLOOR=1 adds the raw fabric to the busy round trips of ofi+tcp and
# ucx+tcp, in the same rounds (rotated with the other two): libfabric's
# fi_pingpong over tcp;ofi_rxm (package libfabric-bin) and UCX's
# ucx_perftest ucp_am_lat with UCX_TLS=tcp (ucx-utils), both spinning on
# their completions, pinned as the others are.  Their round trip is the
# floor that neither library can go under on this machine; the table
# gives each library's ratio to it and says whether the target (0.9 x
# Mercury, issue 33) lies under it.
#
# Timing runs leave data checking off on both sides (it costs a copy and a
# compare per call); VERIFY=1 turns it on on both (cw-perf --verify,
# hg_rate/hg_bw_read/hg_bw_write -v) to show that both move the right bytes.
set -u
B=$(cd "${1:-build}" && pwd)
: "${HG_BIN:?set HG_BIN to the bin/ directory of a Mercury build}"
ROUNDS=${ROUNDS:-3}
ITERS=${ITERS:-20000}
BW_LOOPS=${BW_LOOPS:-50}
TRANSPORTS=${TRANSPORTS:-ofi+tcp ucx+tcp shm}
ONLY=${ONLY:-lat,rate,bw}
VERIFY=${VERIFY:-0}
FLOOR=${FLOOR:-0}
export CAUSEWAY_PLUGIN_PATH=$B/na-shm:$B/na-ofi:$B/na-ucx:$B/na-verbs
for t in hg_perf_server hg_rate hg_bw_read hg_bw_write; do
    [ -x "$HG_BIN/$t" ] || { echo "vs-mercury: no $HG_BIN/$t" >&2; exit 2; }
done
[ -x "$B/tools/cw-perf" ] || { echo "vs-mercury: no $B/tools/cw-perf" >&2; exit 2; }
if [ "$FLOOR" = 1 ]; then
    for t in fi_pingpong ucx_perftest; do
        command -v "$t" >/dev/null ||
            { echo "vs-mercury: FLOOR=1 needs $t (libfabric-bin, ucx-utils)" >&2; exit 2; }
    done
fi
. "$(dirname "$0")/bench_lib.sh" vshg
export CAUSEWAY_PLUGIN_PATH=$B/na-shm:$B/na-ofi:$B/na-ucx:$B/na-verbs
W=$T
RES=$W/results.tsv # figure  unit  better  impl  round  value
: >"$RES"
cw_verify=""
hg_verify=""
if [ "$VERIFY" = 1 ]; then cw_verify=--verify; hg_verify=-v; fi

want() { case ",$ONLY," in *",$1,"*) return 0 ;; esac; return 1; }

record() { # figure unit better impl round value
    [ -n "$6" ] || { echo "vs-mercury: no figure for $1 ($4, round $5)" >&2; exit 1; }
    printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RES"
}

# Causeway: cw_uri TRANSPORT -> listening address
cw_uri() {
    case $1 in
    shm) echo "shm://" ;;
    *) echo "$1://127.0.0.1:0" ;;
    esac
}

# cw_run FIGURE UNIT BETTER ROUND TRANSPORT BUSY(''|--busy) TEST SIZE ARGS...
# One cw-perf server and client; records the median of its one repetition.
cw_run() {
    local fig=$1 unit=$2 better=$3 round=$4 tr=$5 busy=$6 test=$7 size=$8 v
    shift 8
    : >"$W/cw.addr"
    taskset -c 1 "$B/tools/cw-perf" server --listen "$(cw_uri "$tr")" \
        --addr-file "$W/cw.addr" $busy >"$W/cw-srv.log" 2>&1 &
    SRV=$!
    PIDS="$PIDS $SRV"
    wait_file "$W/cw.addr" "$SRV" || {
        echo "vs-mercury: cw-perf server on $tr did not start:" >&2
        cat "$W/cw-srv.log" >&2
        exit 1
    }
    timeout 300 taskset -c 0 "$B/tools/cw-perf" client --target "$(cat "$W/cw.addr")" \
        --test "$test" --sizes "$size" --reps 1 --json $busy $cw_verify "$@" \
        >"$W/cw.json" 2>"$W/cw.err" || {
        echo "vs-mercury: cw-perf $test $size on $tr failed:" >&2
        cat "$W/cw.err" >&2
        exit 1
    }
    kill "$SRV" 2>/dev/null
    wait "$SRV" 2>/dev/null
    SRV=""
    v=$(python3 -c 'import json,sys; print(json.load(sys.stdin)["results"][0]["median"])' \
        <"$W/cw.json")
    record "$fig" "$unit" "$better" causeway "$round" "$v"
}

# Mercury: hg_na TRANSPORT -> "-c COMM -p PROTO"
hg_na() {
    case $1 in
    ofi+tcp) echo "-c ofi -p tcp -H 127.0.0.1" ;;
    ucx+tcp) echo "-c ucx -p tcp -H 127.0.0.1" ;;
    shm) echo "-c na -p sm" ;;
    esac
}

# A server that ends with its client (Mercury's, the raw fabrics'):
# waited for, then killed if it has not.
srv_reap() {
    for _ in $(seq 100); do
        kill -0 "$SRV" 2>/dev/null || break
        sleep 0.05 # sleep-ok: the poll interval of a bounded wait
    done
    kill "$SRV" 2>/dev/null
    wait "$SRV" 2>/dev/null
    SRV=""
}

# raw_client CMD...: a raw fabric's client, output in $W/raw.out.  It may
# come before its server listens: retried while it fails, as long as the
# server lives.
raw_client() {
    for _ in $(seq 100); do
        timeout 300 taskset -c 0 "$@" >"$W/raw.out" 2>&1 && return 0
        kill -0 "$SRV" 2>/dev/null || return 1
        sleep 0.05 # sleep-ok: the poll interval of a bounded retry
    done
    return 1
}

# hg_run FIGURE UNIT BETTER ROUND TRANSPORT BUSY(''|-b) PROG SIZE COLUMN ARGS...
# One hg_perf_server and client PROG for SIZE; records COLUMN (2: rate or
# bandwidth, 3: time in us) of the row for SIZE.
hg_run() {
    local fig=$1 unit=$2 better=$3 round=$4 tr=$5 busy=$6 prog=$7 size=$8 col=$9 v
    shift 9
    rm -f "$W/port.cfg"
    (cd "$W" && exec taskset -c 1 "$HG_BIN/hg_perf_server" $(hg_na "$tr") \
        -f "$W/port.cfg" $busy >"$W/hg-srv.log" 2>&1) &
    SRV=$!
    PIDS="$PIDS $SRV"
    wait_file "$W/port.cfg" "$SRV" || {
        echo "vs-mercury: hg_perf_server on $tr did not start:" >&2
        cat "$W/hg-srv.log" >&2
        exit 1
    }
    (cd "$W" && exec timeout 300 taskset -c 0 "$HG_BIN/$prog" $(hg_na "$tr") \
        -f "$W/port.cfg" -y "$size" -z "$size" $busy $hg_verify "$@") \
        >"$W/hg.out" 2>&1 || {
        echo "vs-mercury: $prog $size on $tr failed:" >&2
        cat "$W/hg.out" >&2
        exit 1
    }
    srv_reap # the client shut the server down
    v=$(awk -v s="$size" -v c="$col" '$1 == s { print $c }' "$W/hg.out")
    record "$fig" "$unit" "$better" mercury "$round" "$v"
}

# raw_run FIGURE ROUND TRANSPORT: the raw fabric's 64 B busy round trip
# (us), server on CPU 1, client on CPU 0, ITERS iterations.
raw_run() {
    local fig=$1 round=$2 tr=$3 port v
    port=$((20000 + RANDOM % 20000))
    case $tr in
    ofi+tcp)
        # fi_pingpong has no warm-up, and its first few thousand round
        # trips on a fresh connection are slower: the floor is the
        # marginal time of the last 3/4 of ITERS (a run of ITERS and one
        # of ITERS / 4, each against its own server).
        local n t1=""
        for n in $((ITERS / 4)) "$ITERS"; do
            port=$((20000 + RANDOM % 20000))
            (exec taskset -c 1 fi_pingpong -p "tcp;ofi_rxm" -e rdm -I "$n" \
                -S 64 -B "$port" >"$W/raw-srv.log" 2>&1) &
            SRV=$!
            PIDS="$PIDS $SRV"
            raw_client fi_pingpong -p "tcp;ofi_rxm" -e rdm -I "$n" -S 64 \
                -P "$port" 127.0.0.1
            srv_reap
            # usec/xfer: the run's time over two transfers an iteration.
            v=$(awk -v n="$n" '$1 == 64 && NF == 8 { printf "%.1f", 2 * n * $7 }' "$W/raw.out")
            [ -n "$v" ] || break
            if [ -z "$t1" ]; then t1=$v; continue; fi
            v=$(awk -v a="$t1" -v b="$v" -v n="$ITERS" \
                'BEGIN { printf "%.2f", (b - a) / (n - int(n / 4)) }')
        done
        ;;
    ucx+tcp)
        (UCX_TLS=tcp UCX_NET_DEVICES=lo exec taskset -c 1 ucx_perftest \
            -p "$port" >"$W/raw-srv.log" 2>&1) &
        SRV=$!
        PIDS="$PIDS $SRV"
        UCX_TLS=tcp UCX_NET_DEVICES=lo raw_client ucx_perftest -p "$port" \
            -t ucp_am_lat -s 64 -n "$ITERS" 127.0.0.1
        srv_reap
        # The average one-way latency after its warm-up, doubled.
        v=$(awk '$1 == "Final:" { print 2 * $4 }' "$W/raw.out")
        ;;
    esac
    [ -n "$v" ] || { echo "vs-mercury: raw $tr failed:" >&2; cat "$W/raw.out" "$W/raw-srv.log" >&2; exit 1; }
    record "$fig" us lower raw "$round" "$v"
}

# pair ROUND CW_CMD... -- HG_CMD...: both, in the order of the round.
pair() {
    local round=$1 i
    shift
    local -a cw=() hg=()
    for ((i = 1; i <= $#; i++)); do
        [ "${!i}" = -- ] && break
        cw+=("${!i}")
    done
    hg=("${@:i+1}")
    if [ $((round % 2)) = 1 ]; then
        cw_run "${cw[@]}"
        hg_run "${hg[@]}"
    else
        hg_run "${hg[@]}"
        cw_run "${cw[@]}"
    fi
}

mib=$((1024 * 1024))
for r in $(seq "$ROUNDS"); do
    echo "# round $r of $ROUNDS" >&2
    for tr in $TRANSPORTS; do
        if want lat; then
            pair "$r" "$tr lat 64 B blocking" us lower "$r" "$tr" "" lat 64 --iters "$ITERS" \
                -- "$tr lat 64 B blocking" us lower "$r" "$tr" "" hg_rate 64 3 -x 1 -l "$ITERS"
            floor=0
            [ "$FLOOR" = 1 ] && [ "$tr" != shm ] && floor=1
            # The raw fabric first in odd rounds and last in even ones.
            [ $floor = 1 ] && [ $((r % 2)) = 1 ] && raw_run "$tr lat 64 B busy" "$r" "$tr"
            pair "$r" "$tr lat 64 B busy" us lower "$r" "$tr" --busy lat 64 --iters "$ITERS" \
                -- "$tr lat 64 B busy" us lower "$r" "$tr" -b hg_rate 64 3 -x 1 -l "$ITERS"
            [ $floor = 1 ] && [ $((r % 2)) = 0 ] && raw_run "$tr lat 64 B busy" "$r" "$tr"
            pair "$r" "$tr lat 4 KiB busy" us lower "$r" "$tr" --busy lat 4096 --iters "$ITERS" \
                -- "$tr lat 4 KiB busy" us lower "$r" "$tr" -b hg_rate 4096 3 -x 1 -l "$ITERS"
        fi
        if want rate; then
            pair "$r" "$tr rate 64 B x16" ops/s higher "$r" "$tr" "" rate 64 \
                --inflight 16 --iters "$ITERS" \
                -- "$tr rate 64 B x16" ops/s higher "$r" "$tr" "" hg_rate 64 2 \
                -x 16 -l $((ITERS / 16))
        fi
        if want bw; then
            for s in 1 4 16; do
                pair "$r" "$tr bw pull $s MiB" MiB/s higher "$r" "$tr" "" bw $((s * mib)) \
                    --dir pull --inflight 1 --iters "$BW_LOOPS" \
                    -- "$tr bw pull $s MiB" MiB/s higher "$r" "$tr" "" hg_bw_write \
                    $((s * mib)) 2 -x 1 -w 1 -l "$BW_LOOPS"
                pair "$r" "$tr bw push $s MiB" MiB/s higher "$r" "$tr" "" bw $((s * mib)) \
                    --dir push --inflight 1 --iters "$BW_LOOPS" \
                    -- "$tr bw push $s MiB" MiB/s higher "$r" "$tr" "" hg_bw_read \
                    $((s * mib)) 2 -x 1 -w 1 -l "$BW_LOOPS"
            done
        fi
    done
done

python3 - "$RES" "$ROUNDS" <<'EOF'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])]
figs = {}
for fig, unit, better, impl, rnd, val in rows:
    f = figs.setdefault(fig, {"unit": unit, "better": better})
    f.setdefault(impl, []).append(float(val))
def show(v):
    return "%.2f [%.2f-%.2f]" % (statistics.median(v), min(v), max(v))
print("# %s rounds, alternated; median [min-max]; ratio = Causeway / Mercury"
      % sys.argv[2])
print("%-28s %-7s %-24s %-24s %s" % ("figure", "unit", "Causeway", "Mercury",
                                     "ratio"))
for fig, f in figs.items():
    cw, hg = f.get("causeway", []), f.get("mercury", [])
    if not cw or not hg:
        continue
    ratio = statistics.median(cw) / statistics.median(hg)
    print("%-28s %-7s %-24s %-24s %.2f (%s is better)" %
          (fig, f["unit"], show(cw), show(hg), ratio, f["better"]))
    raw = f.get("raw", [])
    if raw:
        floor = statistics.median(raw)
        print("%-28s %-7s %-24s Causeway %.2f, Mercury %.2f x the floor; "
              "0.9 x Mercury is %.2f, %s the floor" %
              ("  raw fabric (floor)", f["unit"], show(raw),
               statistics.median(cw) / floor, statistics.median(hg) / floor,
               0.9 * statistics.median(hg) / floor,
               "under" if 0.9 * statistics.median(hg) < floor else "over"))
# What 4 KiB costs against 64 B, busy, per transport and library.
for fig, f in figs.items():
    if not fig.endswith(" lat 4 KiB busy"):
        continue
    small = figs.get(fig.replace("4 KiB", "64 B"), {})
    parts = []
    for impl, name in (("causeway", "Causeway"), ("mercury", "Mercury")):
        if f.get(impl) and small.get(impl):
            parts.append("%s %.2f" % (name, statistics.median(f[impl]) /
                                      statistics.median(small[impl])))
    if parts:
        print("%-28s 4 KiB / 64 B busy: %s" % ("  " + fig.split(" ")[0],
                                              ", ".join(parts)))
EOF
