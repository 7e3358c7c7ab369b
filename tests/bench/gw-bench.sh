#!/bin/bash
# Gateway overhead benchmark: the same cw-perf RPCs sent directly and
# through one causewayd, in the same run, per fabric and progress mode.
#
#   [ITERS=N] [REPS=N] [ROUNDS=N] [PIN=1] tests/bench/gw-bench.sh [BUILD_DIR] [FABRICS...]
#       FABRICS default: shm ofi+tcp ucx+tcp tcp; ITERS 20000, REPS 5,
#       ROUNDS 1
#       ("tcp" is raw TCP through a minimal relay, tcp-relay-rtt: the floor
#       under a hop over TCP on this machine, not a Causeway path)
#
# PIN=1 runs the endpoints on CPU 0 and the gateway on CPU 1 (a bridge node
# emulated on one host, bench_lib.sh): direct runs then get one CPU for
# client and server, and the runs through the gateway the same CPU for them
# plus one for the gateway, so the ratios measure what the gateway itself
# adds rather than three processes competing for two CPUs.
#
# ITERS below ~10000 measure the scheduler's first milliseconds as much as
# the path: a fresh client often shares a core with the server until the
# load balancer separates them (2-6 us added to shm direct latency then).
#
# For each fabric: a cw-perf server, a gateway with one network on that
# fabric (the same fabric on both legs, like a TCP proxy in front of a TCP
# server), and cw-perf clients measuring 64 B latency (median) and the
# 64 B rate with 16 in flight, direct and via "server@gateway".  MODES
# (default all three): blocking; busy (server, gateway and client all
# spinning: three pollers on a 2-vCPU machine share cores, so this measures
# the scheduler as much as the path); gwbusy (only the gateway spins).
# The direct runs go while the gateway is stopped (SIGSTOP), so that a
# spinning gateway does not take a CPU from them.
#
# ROUNDS=N alternates the direct and the via-gateway measurements N times
# against the same server and gateway, and reports the median over the
# rounds of each figure, of each round's added latency and of each round's
# rate ratio, with the range of the ratios in the last column: on a shared
# VM whose speed drifts over minutes, a ratio of two runs taken seconds
# apart is steadier than a ratio of two medians taken a minute apart.
#
#   BRIDGE=IN,OUT [THREADS="1 2"] tests/bench/gw-bench.sh [BUILD_DIR]
#
# instead measures a gateway bridging two networks (client on fabric IN,
# server on fabric OUT, e.g. BRIDGE=ofi+tcp,ucx+tcp; the OUT network listens
# on 127.0.0.2 so both may be the same fabric) with each
# gateway.threads value in THREADS: the 64 B rate with 16 in flight
# (blocking mode) and the gateway's CPU time per forwarded RPC (utime +
# stime from /proc/PID/stat over the rate runs, divided by the forwards
# its admin interface counted).
set -u
B=$(cd "${1:-build}" && pwd)
shift || true
FABRICS=${*:-"shm ofi+tcp ucx+tcp tcp"}
ITERS=${ITERS:-20000}
REPS=${REPS:-5}
ROUNDS=${ROUNDS:-1}
MODES=${MODES:-"blocking busy gwbusy"}
# COALESCE=1: the cw-perf endpoints coalesce too (--coalesce), direct and
# through the gateway alike (the gateway always does, CAUSEWAY_COALESCE).
EPFLAGS=""
[ "${COALESCE:-0}" = 1 ] && EPFLAGS=--coalesce
. "$(dirname "$0")/bench_lib.sh" gwbench
PERF=$B/tools/cw-perf
GWD=$B/gateway/causewayd
median() { grep -o '"median":[0-9.]*' | head -n 1 | cut -d: -f2; }

listen_uri() {
    case $1 in
    shm) echo "shm://$TAG-$2" ;;
    *) echo "$1://127.0.0.1:0" ;;
    esac
}

gw_cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Per-thread CPU ticks of a process: "tid:ticks ...".
gw_thread_ticks() {
    local t
    for t in /proc/"$1"/task/*; do
        awk -v t="${t##*/}" '{printf "%s:%d ", t, $14 + $15}' "$t/stat"
    done
}
# thread_split BEFORE AFTER: each thread's share of the ticks in between.
thread_split() {
    awk -v a="$1" -v b="$2" 'BEGIN {
        n = split(a, x, " "); for (i = 1; i <= n; i++) { split(x[i], p, ":"); s[p[1]] = p[2] }
        n = split(b, y, " "); tot = 0
        for (i = 1; i <= n; i++) { split(y[i], p, ":"); d[i] = p[2] - s[p[1]]; tot += d[i] }
        out = ""
        for (i = 1; i <= n; i++) if (d[i] > 0 && tot > 0) out = out sprintf("%s%.0f%%", out == "" ? "" : "/", 100 * d[i] / tot)
        print out == "" ? "n/a" : out }'
}
forwarded() {
    "$B/tools/cwctl" --admin "$1" stats --json | grep -o '"forwarded":[0-9]*' |
        head -n 1 | cut -d: -f2
}

# BRIDGE=IN,OUT: one gateway between two fabrics, per gateway.threads.
bridge() {
    local in=${BRIDGE%,*} out=${BRIDGE#*,} th srv gw srv_addr gw_addr admin
    local c0 c1 f0 f1 rate hz s0 s1
    hz=$(getconf CLK_TCK)
    printf '%-18s %8s %12s %14s  %s\n' bridge threads via_gw_rps gw_cpu_us/rpc \
        gw_threads_cpu_split
    for th in ${THREADS:-1 2}; do
        rm -f "$T/srv.addr" "$T/gw.ready"
        "${EP[@]}" "$PERF" server --listen "$(listen_uri "$out" srv-br$th)" \
            --addr-file "$T/srv.addr" >/dev/null 2>"$T/srv.log" &
        srv=$!
        PIDS="$PIDS $srv"
        wait_for test -s "$T/srv.addr" || { echo "server failed"; cat "$T/srv.log"; return 1; }
        admin="127.0.0.1:$(free_port)"
        cat >"$T/gw.yaml" <<YAML
gateway: { name: bench, admin: "$admin", threads: $th }
networks:
  - { name: n0, address: "$(listen_uri "$in" gw-in$th)" }
  - { name: n1, address: "$(listen_uri "$out" gw-out$th | sed 's/127.0.0.1/127.0.0.2/')" }
routes:
  - { dest: "$(cat "$T/srv.addr")", via: n1 }
YAML
        "${GWP[@]}" "$GWD" -c "$T/gw.yaml" --ready-fd 3 3>"$T/gw.ready" 2>"$T/gw.log" &
        gw=$!
        PIDS="$PIDS $gw"
        wait_for grep -q '^ready$' "$T/gw.ready" || { echo "gateway failed"; cat "$T/gw.log"; return 1; }
        srv_addr=$(cat "$T/srv.addr")
        gw_addr=$(awk '$1=="n0"{print $2}' "$T/gw.ready")
        c0=$(gw_cpu_ticks "$gw")
        s0=$(gw_thread_ticks "$gw")
        f0=$(forwarded "$admin")
        rate=$(timeout 120 "${EP[@]}" "$PERF" client --sizes 64 --iters "$ITERS" \
            --reps "$REPS" --json --target "$srv_addr@$gw_addr" --test rate \
            --inflight 16 | median)
        c1=$(gw_cpu_ticks "$gw")
        s1=$(gw_thread_ticks "$gw")
        f1=$(forwarded "$admin")
        awk -v b="$in->$out" -v t="$th" -v r="${rate:-}" -v c=$((c1 - c0)) \
            -v n=$((f1 - f0)) -v hz="$hz" -v sp="$(thread_split "$s0" "$s1")" 'BEGIN {
            printf "%-18s %8s %12s %14s  %s\n", b, t,
                r == "" ? "n/a" : sprintf("%.0f", r),
                n == 0 ? "n/a" : sprintf("%.2f", c * 1e6 / hz / n), sp }'
        kill -TERM "$gw" "$srv" 2>/dev/null
        wait "$gw" "$srv" 2>/dev/null
    done
}
if [ -n "${BRIDGE:-}" ]; then
    bridge
    exit $?
fi

# Fabric "tcp": raw TCP messages (tcp-relay-rtt) directly and through a
# minimal L4 relay with the progress engine's waiting policy.  Not a Causeway
# path: the floor under what a gateway hop can cost over TCP here.
# One round's figures, "direct_lat via_lat direct_rate via_rate" ("-" for a
# run that failed or hit its time limit), go to $T/rounds; row prints the
# medians (a figure no round measured prints n/a, never 0).
round() { echo "${1:--} ${2:--} ${3:--} ${4:--}" >>"$T/rounds"; }
row() { # FABRIC MODE
    awk -v f="$1" -v m="$2" '
        function med(a, n,    i, j, t) {
            if (n == 0) return ""
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        function v(x, fmt) { return x == "" ? "n/a" : sprintf(fmt, x) }
        { if ($1 != "-") dl[++ndl] = $1
          if ($2 != "-") gl[++ngl] = $2
          if ($1 != "-" && $2 != "-") ad[++nad] = $2 - $1
          if ($3 != "-") dr[++ndr] = $3
          if ($4 != "-") gr[++ngr] = $4
          if ($3 != "-" && $4 != "-" && $3 > 0) { x = $4 / $3; ra[++nra] = x
              if (lo == "" || x < lo) lo = x
              if (hi == "" || x > hi) hi = x } }
        END {
        printf "%-8s %-8s %12s %12s %10s %12s %12s %8s", f, m,
            v(med(dl, ndl), "%.2f"), v(med(gl, ngl), "%.2f"),
            v(med(ad, nad), "%.2f"), v(med(dr, ndr), "%.0f"),
            v(med(gr, ngr), "%.0f"), v(med(ra, nra), "%.2f")
        if (NR > 1) printf " %11s", nra ? sprintf("%.2f-%.2f", lo, hi) : "n/a"
        printf "\n" }' "$T/rounds"
    rm -f "$T/rounds"
}
# CPU accounting of the rate runs: the client's from time(1), the server's
# and the relay's or gateway's ticks from /proc, summed over the rounds.
cpu_reset() { acc_c=0 acc_s=0 acc_g=0; }
# cpu_run SERVER_PID RELAY_PID CMD...: runs CMD, sets out to its output.
cpu_run() {
    local s0 g0 s1 g1 srv=$1 rel=$2
    shift 2
    s0=$(gw_cpu_ticks "$srv"); g0=$(gw_cpu_ticks "$rel")
    out=$( { /usr/bin/time -f "cputime %U %S" timeout 120 "$@"; } 2>&1)
    s1=$(gw_cpu_ticks "$srv"); g1=$(gw_cpu_ticks "$rel")
    acc_c=$(echo "$out" | awk -v a="$acc_c" '/^cputime/ { a += $2 + $3 } END { print a }')
    acc_s=$((acc_s + s1 - s0)) acc_g=$((acc_g + g1 - g0))
}
# cpu_per_rpc VIA: "client/server[/relay]" us per RPC over the rounds.
cpu_per_rpc() {
    awk -v n=$((ITERS * REPS * ROUNDS)) -v hz="$(getconf CLK_TCK)" -v c="$acc_c" \
        -v ds="$acc_s" -v dg="$acc_g" -v via="$1" 'BEGIN {
        printf "%.2f/%.2f", c * 1e6 / n, ds / hz * 1e6 / n
        if (via) printf "/%.2f", dg / hz * 1e6 / n }'
}

raw_tcp() {
    local mode=$1 rtt=$B/tests/bench/tcp-relay-rtt sb="" rb="" cb="" srv rel
    local sp rp dl gl dr gr dcpu gcpu r
    case $mode in
    busy) sb=--busy; rb=--busy; cb=--busy ;;
    gwbusy) rb=--busy ;;
    esac
    rm -f "$T/rtt.s" "$T/rtt.r"
    "${EP[@]}" "$rtt" server "$T/rtt.s" $sb 2>"$T/rtt.log" &
    srv=$!
    PIDS="$PIDS $srv"
    wait_for test -s "$T/rtt.s" || { echo "tcp: server failed"; cat "$T/rtt.log"; return 1; }
    sp=$(cat "$T/rtt.s")
    "${GWP[@]}" "$rtt" relay "$T/rtt.r" "$sp" $rb 2>>"$T/rtt.log" &
    rel=$!
    PIDS="$PIDS $rel"
    wait_for test -s "$T/rtt.r" || { echo "tcp: relay failed"; cat "$T/rtt.log"; return 1; }
    rp=$(cat "$T/rtt.r")
    c() { timeout 120 "${EP[@]}" "$rtt" client "$@" --iters "$ITERS" --reps "$REPS" \
        --inflight 16 $cb | median; }
    rate() { # PORT: sets r
        cpu_run "$srv" "$rel" "${EP[@]}" "$rtt" client "$1" --test rate \
            --iters "$ITERS" --reps "$REPS" --inflight 16 $cb
        r=$(echo "$out" | median)
    }
    local dacc gacc i
    cpu_reset; dacc="$acc_c $acc_s $acc_g"; gacc=$dacc
    for ((i = 0; i < ROUNDS; i++)); do
        kill -STOP "$rel"
        dl=$(c "$sp" --test lat)
        read -r acc_c acc_s acc_g <<<"$dacc"
        rate "$sp"
        dacc="$acc_c $acc_s $acc_g" dr=$r
        kill -CONT "$rel"
        gl=$(c "$rp" --test lat)
        read -r acc_c acc_s acc_g <<<"$gacc"
        rate "$rp"
        gacc="$acc_c $acc_s $acc_g" gr=$r
        round "$dl" "$gl" "$dr" "$gr"
    done
    row tcp-raw "$mode"
    read -r acc_c acc_s acc_g <<<"$dacc"; dcpu=$(cpu_per_rpc 0)
    read -r acc_c acc_s acc_g <<<"$gacc"; gcpu=$(cpu_per_rpc 1)
    CPU_LINES="${CPU_LINES:-}$(printf '%-8s %-8s %18s %24s' tcp-raw "$mode" "$dcpu" "$gcpu")
"
    kill -TERM "$rel" "$srv" 2>/dev/null
    wait "$rel" "$srv" 2>/dev/null
}

printf '%-8s %-8s %12s %12s %10s %12s %12s %8s' fabric mode \
    "direct_us" "via_gw_us" "added_us" "direct_rps" "via_gw_rps" "ratio"
[ "$ROUNDS" -gt 1 ] && printf ' %11s' ratio_range
printf '\n'
for fab in $FABRICS; do
    if [ "$fab" = tcp ]; then
        for mode in $MODES; do raw_tcp "$mode"; done
        continue
    fi
    for mode in $MODES; do
        busyflag=""
        gwbusy=false
        if [ $mode = busy ]; then busyflag=--busy; gwbusy=true; fi
        if [ $mode = gwbusy ]; then gwbusy=true; fi
        rm -f "$T/srv.addr" "$T/gw.ready"
        "${EP[@]}" "$PERF" server --listen "$(listen_uri "$fab" srv-$mode)" \
            --addr-file "$T/srv.addr" $busyflag $EPFLAGS >/dev/null 2>"$T/srv.log" &
        srv=$!
        PIDS="$PIDS $srv"
        wait_for test -s "$T/srv.addr" || { echo "$fab: server failed"; cat "$T/srv.log"; continue; }
        cat >"$T/gw.yaml" <<YAML
gateway: { name: bench, admin: "", busy_poll: $gwbusy }
networks:
  - { name: n0, address: "$(listen_uri "$fab" gw-$mode)" }
YAML
        "${GWP[@]}" "$GWD" -c "$T/gw.yaml" --ready-fd 3 3>"$T/gw.ready" 2>"$T/gw.log" &
        gw=$!
        PIDS="$PIDS $gw"
        wait_for grep -q '^ready$' "$T/gw.ready" || { echo "$fab: gateway failed"; cat "$T/gw.log"; continue; }
        srv_addr=$(cat "$T/srv.addr")
        gw_addr=$(awk '$1=="n0"{print $2}' "$T/gw.ready")
        via="$srv_addr@$gw_addr"
        perf() { timeout 120 "${EP[@]}" "$PERF" client --sizes 64 --iters "$ITERS" \
            --reps "$REPS" $busyflag $EPFLAGS --json "$@" | median; }
        # The rate runs also account CPU (cpu_run), per RPC over the rounds.
        rate_of() { # TARGET: sets rate
            cpu_run "$srv" "$gw" "${EP[@]}" "$PERF" client --sizes 64 \
                --iters "$ITERS" --reps "$REPS" $busyflag $EPFLAGS --json \
                --target "$1" --test rate --inflight 16
            rate=$(echo "$out" | median)
        }
        cpu_reset; dacc="$acc_c $acc_s $acc_g"; gacc=$dacc
        for ((i = 0; i < ROUNDS; i++)); do
            # The direct runs go with the gateway stopped: a busy-polling
            # one would otherwise take a CPU from them (gwbusy: shm direct
            # 4.3 us instead of 1.0 in a run of 2026-11-24).
            kill -STOP "$gw"
            d_lat=$(perf --target "$srv_addr" --test lat)
            read -r acc_c acc_s acc_g <<<"$dacc"
            rate_of "$srv_addr"
            dacc="$acc_c $acc_s $acc_g" d_rate=$rate
            kill -CONT "$gw"
            g_lat=$(perf --target "$via" --test lat)
            read -r acc_c acc_s acc_g <<<"$gacc"
            rate_of "$via"
            gacc="$acc_c $acc_s $acc_g" g_rate=$rate
            round "${d_lat:-}" "${g_lat:-}" "${d_rate:-}" "${g_rate:-}"
        done
        row "$fab" "$mode"
        read -r acc_c acc_s acc_g <<<"$dacc"; d_cpu=$(cpu_per_rpc 0)
        read -r acc_c acc_s acc_g <<<"$gacc"
        g_cpu=$(cpu_per_rpc 1)
        CPU_LINES="${CPU_LINES:-}$(printf '%-8s %-8s %18s %24s' "$fab" "$mode" "$d_cpu" "$g_cpu")
"
        kill -TERM "$gw" "$srv" 2>/dev/null
        wait "$gw" "$srv" 2>/dev/null
    done
done
echo "targets: added <= 15 us blocking, <= 5 us busy; via_gw_rps >= 0.8 x direct"
echo
echo "CPU time per RPC in the rate runs, us (client/server direct; client/server/gateway via the gateway):"
printf '%-8s %-8s %18s %24s\n' fabric mode direct via_gw
printf '%s' "${CPU_LINES:-}"
