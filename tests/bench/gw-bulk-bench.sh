#!/bin/bash
# Bulk through a gateway (docs/bulk-gateway.md): cw-perf --test bw at
# 64 MiB, in one run:
#   direct-tcp   client -[ofi+tcp]-> server                  (slower leg)
#   direct-shm   client -[shm]-> server                      (faster leg)
#   gw           client -[ofi+tcp]-> gw -[shm]-> server, chunk 1 MiB,
#                depth 8, staging 64 MiB (proxy handles, pipelined)
#   gw-nopipe    the same gateway with depth 1 and chunk = 64 MiB
#   tcp_raw      a raw TCP stream on loopback (tcp-relay-bw)
#   haproxy      the same stream through haproxy in TCP mode (if installed)
#   min_relay    the same stream through a minimal user-space relay
#                (tcp-relay-rtt relay): the floor under any TCP-to-TCP hop
#   direct-ucx, gwu, gwu-nopipe: the same with a ucx+tcp server and an
#                ofi+tcp -> ucx+tcp gateway (legs of similar speed; UCX=0
#                skips them)
#   shm_zc       client -[shm]-> gw -[shm]-> server, zero-staging grants
#                (buffers.zero_copy true, the default)
#   shm_staged   the same gateway setup with zero_copy false (pipelined)
#                (SHM=0 skips both; against direct-shm)
# with ROUNDS=N, the ofi+tcp -> shm cases and the TCP streams N times more
# in alternation, and the medians of each round's ratios;
# then the gateway's peak RSS (VmHWM) across a 1 GiB pull and push with
# 64 MiB of staging.  CASES=shm runs only direct-shm, shm_zc and
# shm_staged (short; prints the load average).
#
#   [REPS=N] [ITERS=N] [GW_CHUNK=1MiB] [GW_DEPTH=8] [UCX=0] [RSS=0] \
#       [SHM=0] [CASES=all|shm] [PIN=1] [ROUNDS=N] \
#       tests/bench/gw-bulk-bench.sh [BUILD_DIR]
set -u
B=$(cd "${1:-build}" && pwd)
REPS=${REPS:-3}
ITERS=${ITERS:-8}
. "$(dirname "$0")/bench_lib.sh" gwbb
PERF=$B/tools/cw-perf
GWD=$B/gateway/causewayd
XFER=$B/tests/integration/test_gwbulk_xfer
server() { # NAME URI
    rm -f "$T/$1.addr"
    "${EP[@]}" "$PERF" server --listen "$2" --addr-file "$T/$1.addr" 2>"$T/$1.log" &
    PIDS="$PIDS $!"
    wait_for test -s "$T/$1.addr" || { echo "server $1 failed"; exit 1; }
    eval "$1=\$(cat \"\$T/\$1.addr\")"
}
gateway() { # NAME CHUNK DEPTH STAGING [SECOND_URI] [ZERO_COPY]
    cat >"$T/$1.yaml" <<YAML
gateway: { name: $1, admin: "", threads: ${GW_THREADS:-1} }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: net1, address: "${5:-shm://$TAG-$1}" }
buffers: { chunk: $2, depth: $3, staging: $4, zero_copy: ${6:-true} }
limits: { max_bulk_bytes_inflight: $4 }
YAML
    "${GWP[@]}" "$GWD" -c "$T/$1.yaml" --ready-fd 3 3>"$T/$1.ready" 2>"$T/$1.log" &
    eval "${1}_pid=$!"
    PIDS="$PIDS $!"
    wait_for grep -qs "^ready$" "$T/$1.ready" || { echo "gateway $1 failed"; cat "$T/$1.log"; exit 1; }
    eval "${1}_tcp=\$(awk '/^tcp0/{print \$2}' \"\$T/\$1.ready\")"
    eval "${1}_net1=\$(awk '/^net1/{print \$2}' \"\$T/\$1.ready\")"
}
# bw LABEL TARGET: MiB/s medians of 64 MiB pull and push.
# CPU time of every process of the bench (client from time(1)), in ticks.
cpu_ticks() {
    local p t=0
    for p in $PIDS; do
        [ -r "/proc/$p/stat" ] && t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat")))
    done
    echo "$t"
}
# Also, per direction, the CPU time all processes spent per MiB moved, and
# the rate two CPUs could sustain at that cost (the CPU-bound ceiling of
# this machine).
bw_dir() { # TARGET DIR -> "MiB/s cpu_us_per_MiB"
    local out c0 c1
    c0=$(cpu_ticks)
    out=$( { /usr/bin/time -f "cputime %U %S" timeout 300 "${EP[@]}" "$PERF" client \
        --target "$1" --test bw --sizes 64M --iters "$ITERS" \
        --reps "$REPS" --dir "$2"; } 2>&1)
    c1=$(cpu_ticks)
    # cw-perf moves 64 MiB ITERS x REPS times, plus one warm-up.
    echo "$out" | awk -v dir="$2" -v d=$((c1 - c0)) \
        -v hz="$(getconf CLK_TCK)" -v mib=$((64 * (ITERS * REPS + 1))) '
        $2 == dir { r = $3 }
        /^cputime/ { c = $2 + $3 }
        END { printf "%s %.0f", (r == "" ? "fail" : r), (c + d / hz) * 1e6 / mib }'
}
bw() {
    local pull push cpull cpush ncpu
    read -r pull cpull <<<"$(bw_dir "$2" pull)"
    read -r push cpush <<<"$(bw_dir "$2" push)"
    ncpu=$(getconf _NPROCESSORS_ONLN)
    printf '%-12s %10s %10s   %s   (cpu us/MiB pull %s push %s; %s-CPU ceilings %s / %s MiB/s)\n' \
        "$1" "$pull" "$push" "$2" "$cpull" "$cpush" "$ncpu" \
        "$(awk -v u="$cpull" -v n="$ncpu" 'BEGIN{printf "%.0f", (u > 0 ? n * 1e6 / u : 0)}')" \
        "$(awk -v u="$cpush" -v n="$ncpu" 'BEGIN{printf "%.0f", (u > 0 ? n * 1e6 / u : 0)}')"
    [ "$pull" = fail ] && pull=0
    [ "$push" = fail ] && push=0
    eval "R_$1_pull=$pull R_$1_push=$push"
}

ratio() { awk -v a="$1" -v b="$2" 'BEGIN{ if (b > 0) printf "%.2f", a / b; else print "n/a" }'; }

# shm -> shm: zero-staging grants against the pipeline and no gateway.
shm_cases() {
    gateway gwzc "${GW_CHUNK:-1MiB}" "${GW_DEPTH:-8}" 64MiB "" true
    gateway gwzs "${GW_CHUNK:-1MiB}" "${GW_DEPTH:-8}" 64MiB "" false
    [ "${CASES:-all}" = shm ] && bw direct_shm "$shmsrv"
    bw shm_zc "$shmsrv@$gwzc_net1"
    bw shm_staged "$shmsrv@$gwzs_net1"
    for d in pull push; do
        eval "z=\$R_shm_zc_$d p=\$R_shm_staged_$d s=\$R_direct_shm_$d"
        echo "$d: shm->shm: zero-staging / staged = $(ratio "$z" "$p")   zero-staging / direct shm = $(ratio "$z" "$s")   staged / direct shm = $(ratio "$p" "$s")"
    done
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
}

server shmsrv "shm://$TAG-srv"
if [ "${CASES:-all}" = shm ]; then
    echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
    printf '%-12s %10s %10s   %s\n' case "pull_MiB/s" "push_MiB/s" target
    shm_cases
    exit 0
fi
server tcpsrv "ofi+tcp://127.0.0.1:0"
gateway gw "${GW_CHUNK:-1MiB}" "${GW_DEPTH:-8}" 64MiB
gateway gwnp 64MiB 1 64MiB

printf '%-12s %10s %10s   %s\n' case "pull_MiB/s" "push_MiB/s" target
bw direct_tcp "$tcpsrv"
bw direct_shm "$shmsrv"
bw gw "$shmsrv@$gw_tcp"
bw gw_nopipe "$shmsrv@$gwnp_tcp"

# The TCP relay baseline: a raw 64 MiB TCP stream (tcp-relay-bw), directly
# and through haproxy in TCP mode.  (An ofi+tcp client pointed at haproxy
# does not get through: the comparison is with what haproxy does best.)
RELAY=$B/tests/bench/tcp-relay-bw
"${EP[@]}" "$RELAY" listen "$T/relay.port" >"$T/relay.log" 2>&1 &
PIDS="$PIDS $!"
wait_for test -s "$T/relay.port" || { echo "tcp-relay-bw failed"; exit 1; }
R_tcp_raw=$("${EP[@]}" "$RELAY" send "$(cat "$T/relay.port")" 67108864 "$((REPS * 3))")
printf '%-12s %10s %10s   %s\n' tcp_raw "$R_tcp_raw" "-" "raw TCP stream, 64 MiB"
if command -v haproxy >/dev/null; then
    port=$(free_port)
    cat >"$T/haproxy.cfg" <<CFG
global
    maxconn 64
defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s
listen relay
    bind 127.0.0.1:$port
    server s1 127.0.0.1:$(cat "$T/relay.port")
CFG
    "${GWP[@]}" haproxy -f "$T/haproxy.cfg" -db >"$T/haproxy.log" 2>&1 &
    PIDS="$PIDS $!"
    accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }
    wait_for accepts "$port" || { echo "haproxy did not listen"; cat "$T/haproxy.log"; exit 1; }
    R_haproxy=$("${EP[@]}" "$RELAY" send "$port" 67108864 "$((REPS * 3))")
    printf '%-12s %10s %10s   %s\n' haproxy "$R_haproxy" "-" "raw TCP stream through haproxy, 64 MiB"
    R_haproxy_pull=$R_haproxy R_haproxy_push=$R_haproxy
fi

# The same stream through the least a user-space relay can do (one read
# and one write of up to 1 MiB per wake-up, nothing parsed: tcp-relay-rtt
# relay), the floor under any gateway between two TCP legs on this machine.
"${GWP[@]}" "$B/tests/bench/tcp-relay-rtt" relay "$T/minrelay.port" "$(cat "$T/relay.port")" \
    >"$T/minrelay.log" 2>&1 &
PIDS="$PIDS $!"
if wait_for test -s "$T/minrelay.port"; then
    R_minrelay=$("${EP[@]}" "$RELAY" send "$(cat "$T/minrelay.port")" 67108864 "$((REPS * 3))")
    printf '%-12s %10s %10s   %s\n' min_relay "$R_minrelay" "-" "raw TCP stream through a minimal relay (tcp-relay-rtt), 64 MiB"
    echo "min_relay / tcp_raw = $(ratio "$R_minrelay" "$R_tcp_raw"): what relaying alone keeps of a TCP stream here"
fi

if [ "${UCX:-1}" = 1 ]; then
    # A second pair with legs of similar speed: ofi+tcp -> ucx+tcp.
    server ucxsrv "ucx+tcp://127.0.0.1:0"
    gateway gwu "${GW_CHUNK:-1MiB}" "${GW_DEPTH:-8}" 64MiB "ucx+tcp://127.0.0.1:0"
    gateway gwunp 64MiB 1 64MiB "ucx+tcp://127.0.0.1:0"
    bw direct_ucx "$ucxsrv"
    bw gwu "$ucxsrv@$gwu_tcp"
    bw gwu_nopipe "$ucxsrv@$gwunp_tcp"
fi

if [ "${SHM:-1}" = 1 ]; then
    shm_cases
fi

for d in pull push; do
    eval "g=\$R_gw_$d t=\$R_direct_tcp_$d s=\$R_direct_shm_$d n=\$R_gw_nopipe_$d h=\${R_haproxy_$d:-0}"
    slow=$(awk -v a="$t" -v b="$s" 'BEGIN{print (a < b) ? a : b}')
    echo "$d: ofi+tcp->shm: gw / slower leg = $(ratio "$g" "$slow")   gw / no pipelining = $(ratio "$g" "$n")   gw / haproxy TCP relay = $(ratio "$g" "$h")"
    if [ "${UCX:-1}" = 1 ]; then
        eval "g=\$R_gwu_$d u=\$R_direct_ucx_$d n=\$R_gwu_nopipe_$d"
        slow=$(awk -v a="$t" -v b="$u" 'BEGIN{print (a < b) ? a : b}')
        echo "$d: ofi+tcp->ucx+tcp: gw / slower leg = $(ratio "$g" "$slow")   gw / no pipelining = $(ratio "$g" "$n")   gw / haproxy TCP relay = $(ratio "$g" "$h")"
    fi
done

# ROUNDS=N: the ofi+tcp -> shm comparisons again, N times in alternation
# (direct, pipelined, not pipelined, and the three TCP streams, each round
# within seconds), and the median over the rounds of each round's ratios:
# on a VM whose speed drifts over minutes, ratios of neighbours.
if [ "${ROUNDS:-1}" -gt 1 ]; then
    echo "alternated rounds (ROUNDS=$ROUNDS; each bw: ITERS=$ITERS REPS=$REPS):"
    for ((i = 0; i < ROUNDS; i++)); do
        bw direct_tcp "$tcpsrv" >>"$T/rounds.log"
        bw gw "$shmsrv@$gw_tcp" >>"$T/rounds.log"
        bw gw_nopipe "$shmsrv@$gwnp_tcp" >>"$T/rounds.log"
        raw=$("${EP[@]}" "$RELAY" send "$(cat "$T/relay.port")" 67108864 "$((REPS * 3))")
        hap=0
        command -v haproxy >/dev/null &&
            hap=$("${EP[@]}" "$RELAY" send "$port" 67108864 "$((REPS * 3))")
        minr=$("${EP[@]}" "$RELAY" send "$(cat "$T/minrelay.port")" 67108864 "$((REPS * 3))")
        echo "$R_direct_tcp_pull $R_direct_tcp_push $R_gw_pull $R_gw_push" \
            "$R_gw_nopipe_pull $R_gw_nopipe_push $raw $hap $minr" >>"$T/brounds"
    done
    awk '
        function med(a, n,    i, j, t) {
            for (i = 2; i <= n; i++)
                for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
            return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
        }
        function add(k, v) { if (v != "") { n[k]++; x[k, n[k]] = v
            if (!(k in lo) || v < lo[k]) lo[k] = v
            if (!(k in hi) || v > hi[k]) hi[k] = v } }
        function q(a, b) { return (b > 0) ? a / b : "" }
        { add("pull: gw / slower leg (direct ofi+tcp)", q($3, $1))
          add("push: gw / slower leg (direct ofi+tcp)", q($4, $2))
          add("pull: gw / no pipelining", q($3, $5))
          add("push: gw / no pipelining", q($4, $6))
          add("pull: gw / haproxy TCP relay", q($3, $8))
          add("push: gw / haproxy TCP relay", q($4, $8))
          add("min_relay / tcp_raw", q($9, $7))
          add("direct ofi+tcp pull MiB/s", $1); add("direct ofi+tcp push MiB/s", $2)
          add("gw pull MiB/s", $3); add("gw push MiB/s", $4) }
        END {
            split("direct ofi+tcp pull MiB/s|direct ofi+tcp push MiB/s|gw pull MiB/s|gw push MiB/s|pull: gw / slower leg (direct ofi+tcp)|push: gw / slower leg (direct ofi+tcp)|pull: gw / no pipelining|push: gw / no pipelining|pull: gw / haproxy TCP relay|push: gw / haproxy TCP relay|min_relay / tcp_raw", keys, "|")
            for (i = 1; i <= 11; i++) {
                k = keys[i]
                if (!(k in n)) { printf "  %-40s n/a\n", k; continue }
                for (j = 1; j <= n[k]; j++) a[j] = x[k, j]
                fmt = (k ~ /MiB/) ? "  %-40s median %.0f  (%.0f-%.0f)\n" : "  %-40s median %.2f  (%.2f-%.2f)\n"
                printf fmt, k, med(a, n[k]), lo[k], hi[k]
            }
        }' "$T/brounds"
fi

# Peak RSS of a gateway across 1 GiB pulled and pushed, checksummed
# (RSS=0 skips it).
[ "${RSS:-1}" = 1 ] || exit 0
gateway gwrss 1MiB 8 64MiB
rm -f "$T/x.addr"
"$XFER" serve "shm://$TAG-x" "$T/x.addr" 2>"$T/x.log" &
PIDS="$PIDS $!"
wait_for test -s "$T/x.addr" || exit 1
before=$(awk '/VmHWM/{print $2}' /proc/"$gwrss_pid"/status)
"$XFER" run "$(cat "$T/x.addr")@$gwrss_tcp" 1G | sed 's/^/  /'
after=$(awk '/VmHWM/{print $2}' /proc/"$gwrss_pid"/status)
echo "gateway VmHWM: ${before} kB before, ${after} kB after 1 GiB each way (staging 64 MiB = 65536 kB)"
