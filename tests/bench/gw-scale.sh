#!/bin/bash
# A gateway's workers (gateway.threads) against many callers: aggregate
# rate direct and through the gateway, in the same run.
#
#   [N=8] [S=4] [THREADS="1 4"] [ITERS=20000] [IN=ofi+tcp] [OUT=ofi+tcp]
#   [ROUNDS=1] [JSON=1] tests/bench/gw-scale.sh [BUILD_DIR]
#
# S cw-perf servers listen on fabric OUT; for each value T in THREADS a
# causewayd with gateway.threads: T listens on IN and OUT (when IN and OUT
# are the same fabric, OUT on 127.0.0.2 so that the two differ; UCX's
# listener accepts only on an address some interface carries, so
# ucx+tcp -> ucx+tcp needs 127.0.0.2 added to lo first).  N cw-perf clients, 16 64 B
# RPCs in flight each (--test rate), spread over the servers, run at once:
# first directly to the servers, then through the gateway
# ("server@gateway"), and the sum of their median rates is reported for
# both.  The gateway's CPU time (utime + stime of all its threads, from
# /proc) over the run through it is divided by the RPCs it forwarded, and
# its handoffs counter (requests that changed thread) by the same.  With
# JSON=1 each row is one object:
#   {"threads":T,"rps":R,"direct_rps":D,"gw_cpu_us_per_rpc":C,
#    "handoffs_per_rpc":H,"per_worker":"a/b/..."}
# PROCS="2 4 8" adds, after each THREADS list, rows for P separate
# gateway processes with gateway.threads: 1 each (the clients spread over
# them, client i through gateway i mod P): what one process with P workers
# should match (path "procs", threads column = P; JSON key "procs").
# ROUNDS=N repeats the THREADS (and PROCS) lists N times.  GWD=PATH runs
# another causewayd build (an A/B comparison, same servers and clients).  On a machine with fewer cores
# than N clients, S servers and T workers, the rates show the scheduler as
# much as the gateway: read the CPU per RPC there.
set -u
B=$(cd "${1:-build}" && pwd)
N=${N:-8}
S=${S:-4}
THREADS=${THREADS:-"1 4"}
ITERS=${ITERS:-20000}
IN=${IN:-ofi+tcp}
OUT=${OUT:-ofi+tcp}
ROUNDS=${ROUNDS:-1}
. "$(dirname "$0")/bench_lib.sh" gwscale
PERF=$B/tools/cw-perf
OUT_HOST=127.0.0.1
[ "$IN" = "$OUT" ] && OUT_HOST=127.0.0.2
GWD=${GWD:-$B/gateway/causewayd}
CWCTL=$B/tools/cwctl
median() { grep -o '"median":[0-9.]*' | head -n 1 | cut -d: -f2; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# Context switches of every thread of process $1 (voluntary: it slept).
ctxsw() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/^voluntary_ctxt_switches/ { v += $2 } /^nonvoluntary_ctxt_switches/ { n += $2 } END { print v + 0, n + 0 }'; }
counter() {
    "$CWCTL" --admin "$1" stats --json | grep -o "\"$2\":[0-9]*" |
        head -n 1 | cut -d: -f2
}
listen_uri() {
    case $1 in
    shm) echo "shm://$TAG-$2" ;;
    ofi+tcp | ucx+tcp) echo "$1://${3:-127.0.0.1}:0" ;;
    *) echo "gw-scale: fabric shm, ofi+tcp or ucx+tcp, not '$1'" >&2; exit 2 ;;
    esac
}

# run_clients [GATEWAY_ADDR...]: N clients at once, client i to server
# i mod S, through gateway i mod (number of gateways) when any is given;
# prints the sum of rates.
run_clients() {
    local i sum=0 r suffix gws=("$@")
    for i in $(seq "$N"); do
        suffix=""
        [ ${#gws[@]} -gt 0 ] && suffix="@${gws[$(((i - 1) % ${#gws[@]}))]}"
        timeout 300 "$PERF" client --target "${SRV[$(((i - 1) % S))]}$suffix" \
            --test rate --sizes 64 --inflight 16 --iters "$ITERS" --reps 1 \
            --json >"$T/cli$i.json" 2>"$T/cli$i.err" &
    done
    wait # runs in $(...): its children are the clients alone
    for i in $(seq "$N"); do
        r=$(median <"$T/cli$i.json")
        [ -n "$r" ] || { echo "client $i failed: $(cat "$T/cli$i.err")" >&2; exit 1; }
        sum=$(awk -v a="$sum" -v b="$r" 'BEGIN { print a + b }')
    done
    echo "$sum"
}

SRV=()
for s in $(seq "$S"); do
    rm -f "$T/srv$s.addr"
    "$PERF" server --listen "$(listen_uri "$OUT" "srv$s" "$OUT_HOST")" \
        --addr-file "$T/srv$s.addr" >/dev/null 2>"$T/srv$s.log" &
    PIDS="$PIDS $!"
    wait_for test -s "$T/srv$s.addr" || { echo "server $s failed" >&2; exit 1; }
    SRV+=("$(cat "$T/srv$s.addr")")
done

# report PATH T DIRECT VIA TICKS FORWARDED HANDOFFS SLEEPS PREEMPTS
#        PER_WORKER KEY: one row (KEY: threads or procs in JSON).
report() {
    awk -v p="$1" -v t="$2" -v d="$3" -v v="$4" -v c="$5" -v n="$6" -v h="$7" \
        -v vs="$8" -v ns="$9" -v per="${10}" -v key="${11}" \
        -v hz="$(getconf CLK_TCK)" -v json="${JSON:-0}" 'BEGIN {
        cpu = n ? c * 1e6 / hz / n : 0; hpr = n ? h / n : 0
        vpr = n ? vs / n : 0; npr = n ? ns / n : 0
        if (json == 1)
            printf "{\"%s\":%d,\"rps\":%.0f,\"direct_rps\":%.0f,\"gw_cpu_us_per_rpc\":%.3f,\"handoffs_per_rpc\":%.5f,\"sleeps_per_rpc\":%.4f,\"preempts_per_rpc\":%.4f,\"per_worker\":\"%s\"}\n",
                key, t, v, d, cpu, hpr, vpr, npr, per
        else
            printf "%-20s %7d %12.0f %12.0f %8.3f %14.3f %12.5f %10.4f %10.4f  %s\n",
                p, t, d, v, d ? v / d : 0, cpu, hpr, vpr, npr, per }'
}

# start_gw NAME THREADS: a gateway with gateway.threads THREADS; sets
# gw_pid, gw_admin and gw_addr (its address on IN).
start_gw() {
    gw_admin="127.0.0.1:$(free_port)"
    cat >"$T/$1.yaml" <<YAML
gateway: { name: scale, admin: "$gw_admin", threads: $2 }
networks:
  - { name: in0, address: "$(listen_uri "$IN" "$1in")" }
  - { name: out0, address: "$(listen_uri "$OUT" "$1out" "$OUT_HOST")" }
routes:
$(for a in "${SRV[@]}"; do echo "  - { dest: \"$a\", via: out0 }"; done)
YAML
    rm -f "$T/$1.ready"
    "$GWD" -c "$T/$1.yaml" --ready-fd 3 3>"$T/$1.ready" 2>"$T/$1.log" &
    gw_pid=$!
    PIDS="$PIDS $gw_pid"
    wait_for grep -q '^ready$' "$T/$1.ready" || { echo "gateway $1 failed: $(cat "$T/$1.log")" >&2; exit 1; }
    gw_addr=$(awk '$1=="in0"{print $2}' "$T/$1.ready")
}
stop_gw() { # PID NAME
    kill -TERM "$1"
    wait "$1" || { echo "gateway $2 exited $?: $(tail -n 5 "$T/$2.log")" >&2; exit 1; }
}

# procs P: P gateways of one worker each, the clients spread over them.
procs() {
    local p=$1 j pids=() admins=() addrs=() direct via c0=0 c1=0 f0=0 f1=0 \
        v0=0 n0=0 v1=0 n1=0 v n per=""
    for j in $(seq "$p"); do
        start_gw "gwp$p-$j" 1
        pids+=("$gw_pid"); admins+=("$gw_admin"); addrs+=("$gw_addr")
    done
    direct=$(run_clients) || exit 1
    for j in $(seq 0 $((p - 1))); do
        c0=$((c0 + $(ticks "${pids[$j]}")))
        read -r v n <<<"$(ctxsw "${pids[$j]}")"; v0=$((v0 + v)); n0=$((n0 + n))
        f0=$((f0 + $(counter "${admins[$j]}" forwarded)))
    done
    via=$(run_clients "${addrs[@]}") || exit 1
    for j in $(seq 0 $((p - 1))); do
        c1=$((c1 + $(ticks "${pids[$j]}")))
        read -r v n <<<"$(ctxsw "${pids[$j]}")"; v1=$((v1 + v)); n1=$((n1 + n))
        n=$(counter "${admins[$j]}" forwarded); f1=$((f1 + n))
        per="$per${per:+/}$n"
    done
    for j in $(seq 0 $((p - 1))); do stop_gw "${pids[$j]}" "gwp$p-$((j + 1))"; done
    # per: each process's total (it forwarded nothing before this run)
    report "$IN->$OUT/procs" "$p" "$direct" "$via" $((c1 - c0)) $((f1 - f0)) 0 \
        $((v1 - v0)) $((n1 - n0)) "$per" procs
}

[ "${JSON:-0}" = 1 ] || printf '%-20s %7s %12s %12s %8s %14s %12s %10s %10s  %s\n' path \
    threads direct_rps gw_rps ratio gw_cpu_us/rpc handoffs/rpc sleeps/rpc preempt/rpc per_worker
for _ in $(seq "$ROUNDS"); do
    for th in $THREADS; do
        start_gw "gw$th" "$th"
        gw=$gw_pid admin=$gw_admin
        direct=$(run_clients) || exit 1
        c0=$(ticks "$gw")
        read -r v0 n0 <<<"$(ctxsw "$gw")"
        f0=$(counter "$admin" forwarded)
        h0=$(counter "$admin" handoffs)
        via=$(run_clients "$gw_addr") || exit 1
        c1=$(ticks "$gw")
        read -r v1 n1 <<<"$(ctxsw "$gw")"
        f1=$(counter "$admin" forwarded)
        h1=$(counter "$admin" handoffs)
        per=$("$CWCTL" --admin "$admin" stats --json | grep -o '"workers":\[[^]]*\]' |
            grep -o '"forwarded":[0-9]*' | cut -d: -f2 | paste -sd/)
        stop_gw "$gw" "gw$th"
        report "$IN->$OUT" "$th" "$direct" "$via" $((c1 - c0)) $((f1 - f0)) \
            $((${h1:-0} - ${h0:-0})) $((v1 - v0)) $((n1 - n0)) "$per" threads
    done
    for p in ${PROCS:-}; do procs "$p"; done
done
