#!/bin/bash
# gateway.threads: 2 runs two workers (one thread and one context each),
# each with an endpoint on both networks behind their one published
# address.  RPCs go between the networks in both directions at once
# (ofi+tcp -> shm and shm -> ofi+tcp, with and without bulk), a cancel at
# the origin propagates to the target in both directions, the deadline
# travels, and every forward record is freed.
. "$(dirname "$0")/gw_lib.sh"

start_echo shmecho "shm://$TAG-echo"
start_echo tcpecho "ofi+tcp://127.0.0.1:0"
start_echo shmslow "shm://$TAG-slow" 1500
start_echo tcpslow "ofi+tcp://127.0.0.1:0" 1500
cat >"$T/gw.yaml" <<YAML
gateway: { name: thrgw, admin: "127.0.0.1:$(free_port)", threads: 2 }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
YAML
start_gw gw "$T/gw.yaml"
grep -q "network tcp0 listening on .* (2 threads)" "$T/gw.log" &&
    grep -q "network shm0 listening on .* (2 threads)" "$T/gw.log" ||
    fail "networks not served by both workers: $(cat "$T/gw.log")"
pass "tcp0 and shm0 each served by both workers"

# Both directions at once, 8 in flight each; one of each with bulk.
timeout 120 "$CW_PING" -q --expect CW_OK -c 400 -n 8 "$shmecho@$gw_tcp0" \
    >"$T/a.out" 2>"$T/a.err" &
a=$!
timeout 120 "$CW_PING" -q --expect CW_OK -c 400 -n 8 "$tcpecho@$gw_shm0" \
    >"$T/b.out" 2>"$T/b.err" &
b=$!
timeout 120 "$CW_PING" -q --expect CW_OK -c 50 -n 4 -s 64K --with-bulk \
    "$shmecho@$gw_tcp0" >"$T/c.out" 2>"$T/c.err" &
c=$!
timeout 120 "$CW_PING" -q --expect CW_OK -c 50 -n 4 -s 64K --with-bulk \
    "$tcpecho@$gw_shm0" >"$T/d.out" 2>"$T/d.err" &
d=$!
for p in a b c d; do
    eval "wait \$$p" || fail "concurrent run $p: $(cat "$T/$p.out") $(tail -n 3 "$T/$p.err")"
    pass "concurrent run $p: $(tail -n 1 "$T/$p.out")"
done
stats=$("$CWCTL" --admin "$gw_admin" stats --json)
[ "$(json_num "$stats" forwarded)" = 900 ] ||
    fail "gateway forwarded $(json_num "$stats" forwarded) of 900: $stats"
pass "gateway counted 900 forwards"
# Requests one shard hands another leave in batches when several go to one
# next hop (core: cw_context_batch_begin), a batch holding two or more.
nb=$(json_num "$stats" tx_batches)
nm=$(json_num "$stats" tx_batched)
[ -n "$nb" ] && [ -n "$nm" ] && [ "$nm" -ge $((2 * nb)) ] ||
    fail "batch counters: $nb batches of $nm messages: $stats"
pass "$nb batches sent, carrying $nm requests and answers"
# cw-ping's echo server does not touch the bulk handle: the tokens are
# issued and revoked here; gw-bulk-xfer-threads moves bytes across shards.
[ "$(json_num "$stats" tokens_issued)" = 100 ] &&
    [ "$(json_num "$stats" tokens_live)" = 0 ] ||
    fail "proxy tokens of the bulk calls: $stats"
pass "100 proxy tokens issued on one shard for the other, all revoked"
# The gateway's own time per forward (added latency) is measured: each
# route's mean is above 0 ns (send and answer stamps read the clock, not
# the pass's one reading, which made it 0).
lat=$(printf '%s' "$stats" | grep -o '"added_latency_mean_ns":[0-9]*' | cut -d: -f2)
[ "$(printf '%s\n' "$lat" | wc -l)" = 2 ] && ! printf '%s\n' "$lat" | grep -qx 0 ||
    fail "added latency per route: $(echo $lat): $stats"
pass "added latency measured on both routes: $(echo $lat) ns"

# Cancel at the origin, across the shards, both directions.  500 ms
# after the call, against targets that answer after 1.5 s: the requests
# are at the gateway or beyond by then even under TSan on a loaded
# machine (at 100 ms, a TSan run beside another test cancelled two of
# them before the gateway's forward saw them, and it counted 4).
ping_expect "cancel tcp -> shm" CW_CANCELED -c 3 -n 3 -t 10000 --cancel-after 500 "$shmslow@$gw_tcp0"
ping_expect "cancel shm -> tcp" CW_CANCELED -c 3 -n 3 -t 10000 --cancel-after 500 "$tcpslow@$gw_shm0"
wait_for sh -c "'$CWCTL' --admin '$gw_admin' stats --json | grep -q '^{\"inflight\":0,.*\"canceled\":6,'" ||
    fail "gateway did not cancel its forwards: $("$CWCTL" --admin "$gw_admin" stats --json)"
pass "6 forwards canceled, 0 in flight"
# A slow target serves none of them.  Each cancel either reaches it or,
# when the request is still in the gateway (a slow run, e.g. TSan), stops
# the request there; at least some must reach the targets.
seen=0
for s in shmslow tcpslow; do
    eval "stop_pid \$${s}_PID"
    grep -q "served 0, canceled by their caller [0-3]$" "$T/$s.log" ||
        fail "$s: $(cat "$T/$s.log")"
    seen=$((seen + $(grep -o 'caller [0-9]*' "$T/$s.log" | cut -d' ' -f2)))
    pass "cancel across the shards, $s: $(grep 'canceled by' "$T/$s.log")"
done
[ "$seen" -ge 1 ] || fail "no cancel reached a target"

# The deadline travels across the shards.
start_echo slow3 "ofi+tcp://127.0.0.1:0" 1500
# Each call's own time, as cw-ping reports it ("... CW_TIMEOUT (...)
# after N us"): not the tool's start, which memcheck makes take seconds.
timeout 60 "$CW_PING" --expect CW_TIMEOUT -c 2 -n 2 -t 300 "$slow3@$gw_shm0" \
    >"$T/ping.out" 2>"$T/ping.err" ||
    fail "300 ms deadline across the shards: $(cat "$T/ping.out") $(tail -n 3 "$T/ping.err")"
worst=$(grep -o 'after [0-9]*' "$T/ping.out" | cut -d' ' -f2 | sort -n | tail -n 1)
[ -n "$worst" ] && [ "$worst" -lt 1000000 ] ||
    fail "calls with a 300 ms deadline took up to ${worst:-?} us (the target answers after 1.5 s): $(cat "$T/ping.out")"
pass "300 ms deadline across the shards: $(tail -n 1 "$T/ping.out"), slowest after $worst us"

wait_for sh -c "'$CWCTL' --admin '$gw_admin' stats --json | grep -q '^{\"inflight\":0,'" ||
    fail "forwarded RPCs not freed: $("$CWCTL" --admin "$gw_admin" stats --json)"
stop_pid "$gw_PID"
[ "$STOP_RC" = 0 ] || fail "gateway exited with $STOP_RC: $(tail -n 20 "$T/gw.log")"
grep -q "ERROR\|LeakSanitizer\|runtime error" "$T/gw.log" &&
    fail "gateway reported errors: $(grep -m 5 'ERROR\|LeakSanitizer\|runtime error' "$T/gw.log")"
pass "gateway stopped cleanly (threads joined, nothing leaked)"
