# Shared part of the soak experiments (sourced, bash; docs/reliability.md).
#   soak.sh|reloads.sh CAUSEWAYD CW_PING CWCTL SOAK
# Two soak servers (ucx+tcp and ofi+tcp), one causewayd with ofi+tcp,
# ucx+tcp and shm networks and a route to each server, and CLIENTS soak
# clients: even ones ofi+tcp -> ucx+tcp, odd ones shm -> ofi+tcp.  Every
# process goes through gw_lib.sh: killed and reaped on exit, the gateway
# checked (exit 0 on SIGTERM, no sanitizer report).
. "$(dirname "${BASH_SOURCE[0]}")/../integration/gw_lib.sh"
SOAK=$4
gw_vg_wrap SOAK soak # under memcheck too with CW_VALGRIND

# The load (totals over all clients; sizes take K, M, G).
CLIENTS=${CLIENTS:-4}
INFLIGHT=${INFLIGHT:-32}
RPCS=${RPCS:-20000}
BULK_BYTES=${BULK_BYTES:-256M}
BULK_MIN=${BULK_MIN:-1M}
BULK_MAX=${BULK_MAX:-64M}
DURATION=${DURATION:-0}
RPC_TIMEOUT_MS=${RPC_TIMEOUT_MS:-60000}
# A client still running this long after it started fails the run.
CLIENT_LIMIT_S=${CLIENT_LIMIT_S:-3600}
GW_THREADS=${GW_THREADS:-2}
SOAK_SEED=${SOAK_SEED:-1}
# The bulk staging pool: small enough that the warm-up touches what the
# run will use (its free list is LIFO: the same chunks are reused).
GW_STAGING=${GW_STAGING:-64MiB}
# Under ASan, freed memory waits in a quarantine (256 MiB by default) that
# fills with the traffic: RSS would grow with the bytes moved, not with
# what the gateway keeps.  A small one fills during the warm-up.
[ -n "${ASAN_OPTIONS:-}" ] && export ASAN_OPTIONS="$ASAN_OPTIONS:quarantine_size_mb=4"

# now_ms: the wall clock in milliseconds.
now_ms() { date +%s%3N; }

# wait_s SECONDS CMD...: retry CMD until it succeeds, for SECONDS of wall
# time (wait_for_s counts polls, and a poll that runs cwctl takes longer
# than its interval).
wait_s() {
    local end=$(($(now_ms) + $1 * 1000))
    shift
    until "$@"; do
        [ "$(now_ms)" -lt "$end" ] || return 1
        sleep 0.05 # sleep-ok: the poll interval of a bounded wait
    done
}

# num_of SIZE: SIZE with a K, M or G suffix, in bytes.
num_of() {
    case $1 in
    *K) echo $((${1%K} << 10)) ;;
    *M) echo $((${1%M} << 20)) ;;
    *G) echo $((${1%G} << 30)) ;;
    *) echo "$1" ;;
    esac
}

# soak_fabrics: ofi+tcp, ucx+tcp and shm open here, else exit 77 naming
# the one that is absent (fabric_here: a fabric present but broken fails).
soak_fabrics() {
    local u
    for u in "ofi+tcp://127.0.0.1:0" "ucx+tcp://127.0.0.1:0" "shm://"; do
        if ! fabric_here "$u"; then
            echo "SKIP: the soak needs $u: $FABRIC_WHY"
            exit 77
        fi
    done
}

# soak_server NAME URI: a soak server; sets $NAME (its address) and
# ${NAME}_PID; its totals go to $T/NAME.out when it stops.
soak_server() {
    rm -f "$T/$1.addr"
    "$SOAK" serve "$2" "$T/$1.addr" >"$T/$1.out" 2>"$T/$1.log" &
    eval "${1}_PID=$!"
    PIDS="$PIDS $!"
    wait_for addr_ready "$T/$1.addr" "$!" || fail "soak server $1 ($2) did not start"
    eval "$1=\$(cat \"\$T/\$1.addr\")"
}

# soak_cfg FILE PRIORITY [EXTRA]: the gateway's configuration, its two
# routes with PRIORITY; EXTRA is appended as is (reloads.sh breaks it).
soak_cfg() {
    cat >"$1.tmp" <<YAML
gateway: { name: soakgw, admin: "$GW_ADMIN", threads: $GW_THREADS }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:$GW_TCP_PORT" }
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:$GW_UCX_PORT" }
  - { name: shm0, address: "shm://$TAG-gw" }
routes:
  - { dest: "$srv_ucx", via: ucx0, priority: $2 }
  - { dest: "$srv_tcp", via: tcp0, priority: $2 }
buffers: { staging: $GW_STAGING }
${3:-}
YAML
    mv "$1.tmp" "$1"
}

# soak_setup: servers and gateway ($gw_PID, $gw_tcp0, $gw_shm0, $GW_ADMIN).
soak_setup() {
    soak_fabrics
    soak_server srv_ucx "ucx+tcp://127.0.0.1:0"
    soak_server srv_tcp "ofi+tcp://127.0.0.1:0"
    GW_ADMIN="127.0.0.1:$(free_port)"
    GW_TCP_PORT=$(free_port)
    GW_UCX_PORT=$(free_port)
    soak_cfg "$T/gw.yaml" 0
    start_gw gw "$T/gw.yaml"
}

# soak_clients [ARG...]: start the clients in the background
# ($CLIENT_PIDS), ARGs added to each one's; each gets its share of RPCS
# and BULK_BYTES, and prints one soak-client line to $T/clientN.out.
soak_clients() {
    local i target rpcs bulk
    rpcs=$((RPCS / CLIENTS))
    bulk=$(($(num_of "$BULK_BYTES") / CLIENTS))
    CLIENT_PIDS=""
    for ((i = 0; i < CLIENTS; i++)); do
        if ((i % 2 == 0)); then target="$srv_ucx@$gw_tcp0"; else target="$srv_tcp@$gw_shm0"; fi
        timeout "$CLIENT_LIMIT_S" "$SOAK" run "$target" --id "$i" \
            --rpcs "$rpcs" --inflight "$INFLIGHT" --bulk-bytes "$bulk" \
            --bulk-min "$(num_of "$BULK_MIN")" --bulk-max "$(num_of "$BULK_MAX")" \
            --duration "$DURATION" --timeout "$RPC_TIMEOUT_MS" --seed "$SOAK_SEED" "$@" \
            >"$T/client$i.out" 2>"$T/client$i.log" &
        CLIENT_PIDS="$CLIENT_PIDS $!"
        PIDS="$PIDS $!"
    done
}

# clients_running: at least one client has not exited.
clients_running() {
    local p
    for p in $CLIENT_PIDS; do
        kill -0 "$p" 2>/dev/null && return 0
    done
    return 1
}

# gw_sample: "RSS_KIB FDS" of the gateway now.
gw_sample() {
    local rss
    rss=$(awk '/^VmRSS:/ { print $2 }' "/proc/$gw_PID/status")
    echo "${rss:-0} $(find "/proc/$gw_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)"
}

# gw_fd_kinds: the gateway's descriptors now, counted by kind ("socket",
# "anon_inode:[eventfd]", a file's path), one "COUNT KIND" line each:
# what to compare when the fd rule fails.
gw_fd_kinds() {
    local f
    for f in "/proc/$gw_PID/fd"/*; do
        readlink "$f" 2>/dev/null
    done | sed 's/:\[[0-9]*\]$//' | sort | uniq -c
}

# kv FILE KEY: the value of KEY=VALUE in FILE's soak line.
kv() {
    tr ' ' '\n' <"$1" | sed -n "s/^$2=//p" | head -n 1
}

# soak_wait_clients: wait for every client; each must exit 0 with a pass
# line.  Sums their fields into SUM_<field>.
soak_wait_clients() {
    local i f k bad=""
    wait_count $CLIENT_PIDS
    for k in sent ok failed unanswered dup corrupt bytes bulk bulk_bytes \
        srv_rpcs srv_dup srv_corrupt srv_bytes srv_bulk srv_bulk_bytes \
        srv_bulk_corrupt srv_bulk_failed lost ms; do
        eval "SUM_$k=0"
    done
    for ((i = 0; i < CLIENTS; i++)); do
        f="$T/client$i.out"
        if ! grep -q "^soak-client .* result=pass$" "$f"; then
            bad="$bad client$i"
            echo "--- client $i: $(cat "$f") $(tail -n 5 "$T/client$i.log")"
        fi
        [ -s "$f" ] || continue
        for k in sent ok failed unanswered dup corrupt bytes bulk bulk_bytes \
            srv_rpcs srv_dup srv_corrupt srv_bytes srv_bulk srv_bulk_bytes \
            srv_bulk_corrupt srv_bulk_failed lost ms; do
            eval "SUM_$k=\$((SUM_$k + $(kv "$f" "$k")))"
        done
    done
    CLIENTS_BAD=$bad
    [ "$WAIT_OK" = "$CLIENTS" ] || CLIENTS_BAD="${CLIENTS_BAD:- } ($WAIT_OK of $CLIENTS exited 0)"
}

# soak_stop_servers: SIGTERM both servers; each must exit 0, without a
# sanitizer report, and print its totals; sums them into SRV_<field>.
soak_stop_servers() {
    local s p k
    for k in rpcs dup corrupt bytes bulk bulk_bytes bulk_corrupt bulk_failed malformed; do
        eval "SRV_$k=0"
    done
    for s in srv_ucx srv_tcp; do
        eval "p=\$${s}_PID"
        kill -TERM "$p"
        wait "$p" || fail "soak server $s exited with status $?"
        grep -qE "$SANITIZER_RE" "$T/$s.log" && fail "sanitizer report in $s.log"
        grep -q "^soak-server " "$T/$s.out" || fail "soak server $s printed no totals"
        for k in rpcs dup corrupt bytes bulk bulk_bytes bulk_corrupt bulk_failed malformed; do
            eval "SRV_$k=\$((SRV_$k + $(kv "$T/$s.out" "$k")))"
        done
    done
}

# human BYTES: in GiB or MiB.
human() {
    awk -v b="$1" 'BEGIN { if (b >= 1073741824) printf "%.2f GiB", b / 1073741824;
                           else printf "%.1f MiB", b / 1048576 }'
}
