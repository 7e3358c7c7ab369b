#!/bin/bash
# Soak (issue 31; docs/reliability.md): CLIENTS clients x INFLIGHT RPCs in
# flight through one causewayd, half of them ofi+tcp -> ucx+tcp, half shm
# -> ofi+tcp, payloads 0 B-64 KiB and bulk transfers of BULK_MIN-BULK_MAX,
# every payload checked at both ends, every RPC counted at both ends by
# its sequence number.  Prints a figure table; passes when nothing was
# lost, duplicated, corrupted or failed, both ends agree, and the
# gateway's RSS and open fds at the end (the clients gone, nothing in
# flight) are at most RSS_PCT and FD_PCT percent (5, 5) above their value
# after the warm-up (a drop passes: it is not a leak).
#   soak.sh CAUSEWAYD CW_PING CWCTL SOAK
# Environment (totals over all clients): CLIENTS (4), INFLIGHT (32), RPCS
# (20000), BULK_BYTES (256M), BULK_MIN (1M), BULK_MAX (64M), DURATION
# (seconds, 0: the counts alone), WARMUP_PCT (25: the warm-up ends when
# the gateway has forwarded that share of RPCS and of BULK_BYTES),
# SAMPLE_S (5), RSS_PCT (5), FD_PCT (5), GW_THREADS (2), RPC_TIMEOUT_MS
# (60000).
. "$(dirname "$0")/soak_lib.sh"
WARMUP_PCT=${WARMUP_PCT:-25}
SAMPLE_S=${SAMPLE_S:-5}
RSS_PCT=${RSS_PCT:-5}
FD_PCT=${FD_PCT:-5}

soak_setup
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t0=$(date +%s%N)
soak_clients
warm_rpcs=$((RPCS * WARMUP_PCT / 100))
warm_bulk=$(($(num_of "$BULK_BYTES") / 100 * WARMUP_PCT))
# warmed: every client has had an RPC and a bulk transfer through (its
# "warm" line: every connection it and the gateway open for it is open),
# and the gateway has forwarded warm_rpcs RPCs and warm_bulk bulk bytes;
# clients that all ended before that fail the run.  (Counts alone let a
# loaded run sample the descriptors before a slow client's first call:
# 57 after the warm-up, 61 at the end.)
warmed() {
    local s i
    for ((i = 0; i < CLIENTS; i++)); do
        grep -q "^soak client $i: warm$" "$T/client$i.log" 2>/dev/null || {
            clients_running || fail "the clients ended before the warm-up: $(cat "$T"/client*.out)"
            return 1
        }
    done
    s=$("$CWCTL" --admin "$GW_ADMIN" stats --json 2>/dev/null)
    [ "$(json_num "$s" forwarded)" -ge "$warm_rpcs" ] 2>/dev/null &&
        [ "$(json_num "$s" bytes)" -ge "$warm_bulk" ] 2>/dev/null && return 0
    clients_running || fail "the clients ended before the warm-up: $(cat "$T"/client*.out)"
    return 1
}
wait_for_s "$CLIENT_LIMIT_S" warmed || fail "no warm-up within $CLIENT_LIMIT_S s"
warm_ms=$((($(date +%s%N) - t0) / 1000000))
first=$(gw_sample)
gw_fd_kinds >"$T/fds.warm"
rss_series=${first% *}
fd_series=${first#* }
fwd_series=$(stat_of "$GW_ADMIN" forwarded)
pass "warm-up after $warm_ms ms: gateway RSS ${first% *} KiB, ${first#* } fds"
# Sampled every SAMPLE_S seconds while the clients run (bounded by their
# own limit).
for ((n = 0; n <= CLIENT_LIMIT_S / SAMPLE_S + 1; n++)); do
    clients_running || break
    sleep "$SAMPLE_S" # sleep-ok: the sampling interval of the RSS and fd series
    s=$(gw_sample)
    rss_series="$rss_series ${s% *}"
    fd_series="$fd_series ${s#* }"
    fwd_series="$fwd_series $(stat_of "$GW_ADMIN" forwarded)"
done
soak_wait_clients
run_ms=$((($(date +%s%N) - t0) / 1000000))
wait_for sh -c "'$CWCTL' --admin '$GW_ADMIN' stats --json | grep -q '\"inflight\":0,'" ||
    fail "the gateway still has RPCs in flight after the clients ended"
last=$(gw_sample)
gw_fd_kinds >"$T/fds.end"
rss_series="$rss_series ${last% *}"
fd_series="$fd_series ${last#* }"
gws=$("$CWCTL" --admin "$GW_ADMIN" stats --json)
fwd_series="$fwd_series $(json_num "$gws" forwarded)"
soak_stop_servers
gw_stop_clean gw

rss0=${first% *} fd0=${first#* } rss1=${last% *} fd1=${last#* }
verdict() { # OK_CONDITION
    if eval "$1"; then echo pass; else echo FAIL; fi
}
v_counts=$(verdict '[ -z "$CLIENTS_BAD" ] && [ "$SUM_lost" = 0 ] && [ "$SUM_dup" = 0 ] &&
    [ "$SUM_srv_dup" = 0 ] && [ "$SUM_corrupt" = 0 ] && [ "$SUM_srv_corrupt" = 0 ] &&
    [ "$SUM_srv_bulk_corrupt" = 0 ] && [ "$SUM_failed" = 0 ] && [ "$SUM_unanswered" = 0 ]')
# Both ends agree: what the clients say the servers told them is what the
# servers print at exit, and the servers saw every number sent once.
v_ends=$(verdict '[ "$SRV_rpcs" = "$SUM_sent" ] && [ "$SRV_rpcs" = "$SUM_srv_rpcs" ] &&
    [ "$SRV_dup" = 0 ] && [ "$SRV_corrupt" = 0 ] && [ "$SRV_bulk_corrupt" = 0 ] &&
    [ "$SRV_bulk_failed" = 0 ] && [ "$SRV_malformed" = 0 ] &&
    [ "$SRV_bytes" = "$SUM_bytes" ] && [ "$SRV_bulk_bytes" = "$SUM_bulk_bytes" ]')
v_gw=$(verdict '[ "$(json_num "$gws" failed)" = 0 ] && [ "$(json_num "$gws" timedout)" = 0 ] &&
    [ "$(json_num "$gws" busy)" = 0 ]')
v_rss=$(verdict '[ $((rss1 * 100)) -le $((rss0 * (100 + RSS_PCT))) ]')
v_fd=$(verdict '[ $((fd1 * 100)) -le $((fd0 * (100 + FD_PCT))) ]')
result=PASS
for v in "$v_counts" "$v_ends" "$v_gw" "$v_rss" "$v_fd"; do
    [ "$v" = pass ] || result=FAIL
done

rate=$(awk -v n="$SUM_sent" -v ms="$run_ms" 'BEGIN { printf "%.0f", ms ? n * 1000 / ms : 0 }')
cat <<EOF

Soak, $started, $(uname -n), $(nproc) CPUs
  CLIENTS=$CLIENTS INFLIGHT=$INFLIGHT RPCS=$RPCS BULK_BYTES=$BULK_BYTES BULK_MIN=$BULK_MIN BULK_MAX=$BULK_MAX DURATION=$DURATION GW_THREADS=$GW_THREADS WARMUP_PCT=$WARMUP_PCT SAMPLE_S=$SAMPLE_S
  paths: ofi+tcp -> causewayd -> ucx+tcp (clients 0, 2, ...), shm -> causewayd -> ofi+tcp (clients 1, 3, ...)
| figure                                   | value |
|------------------------------------------|-------|
| RPCs sent (incl. bulk) / completed CW_OK | $SUM_sent / $SUM_ok |
| payload bytes checked (requests+replies) | $SUM_bytes ($(human "$SUM_bytes")) |
| bulk transfers / bytes checked           | $SUM_bulk / $SUM_bulk_bytes ($(human "$SUM_bulk_bytes")) |
| lost / duplicated / corrupted (clients)  | $SUM_lost / $SUM_dup / $SUM_corrupt |
| failed / unanswered (clients)            | $SUM_failed / $SUM_unanswered |
| servers saw: RPCs / dup / corrupt        | $SRV_rpcs / $SRV_dup / $((SRV_corrupt + SRV_bulk_corrupt)) |
| gateway: forwarded / failed / timed out / busy | $(json_num "$gws" forwarded) / $(json_num "$gws" failed) / $(json_num "$gws" timedout) / $(json_num "$gws" busy) |
| gateway: bulk delegations / bytes        | $(json_num "$gws" transfers) / $(json_num "$gws" bytes) |
| time (warm-up) / rate                    | $((run_ms / 1000)) s ($((warm_ms / 1000)) s) / $rate RPC/s |
| samples at RPCs forwarded (every $SAMPLE_S s) | $fwd_series |
| gateway RSS KiB after warm-up .. end     | $rss_series |
| gateway open fds after warm-up .. end    | $fd_series |
| RSS end / after warm-up (rule <= $((100 + RSS_PCT))%)   | $rss1 / $rss0 = $((rss1 * 100 / rss0))%: $v_rss |
| fds end / after warm-up (rule <= $((100 + FD_PCT))%)   | $fd1 / $fd0 = $((fd1 * 100 / fd0))%: $v_fd |
| counts 0 lost/dup/corrupt/failed         | $v_counts |
| both ends agree                          | $v_ends |
| gateway: 0 failed, timed out, busy       | $v_gw |
| result                                   | $result |
EOF
if [ "$v_fd" != pass ]; then
    echo "the gateway's descriptors by kind, after the warm-up and at the end:"
    diff "$T/fds.warm" "$T/fds.end" | sed 's/^/  /'
fi
[ "$result" = PASS ] || fail "soak: $CLIENTS_BAD counts $v_counts, ends $v_ends, gateway $v_gw, RSS $v_rss, fds $v_fd"
pass "soak: $SUM_sent RPCs and $(human "$SUM_bulk_bytes") of bulk through the gateway, 0 lost, 0 duplicated, 0 corrupted; RSS within $RSS_PCT%, fds within $FD_PCT% of the warm-up's"
