#!/bin/bash
# gateway.threads: 4, the workers behind one published address per network
# (docs/gateway.md, "Threads"):
#   1. 8 callers, 16 in flight each, ofi+tcp -> gateway -> shm, while the
#      configuration is reloaded three times: every call succeeds, every
#      worker forwards some of them, fewer than 1% change thread, and the
#      servers see each caller's requests in the order it made them;
#   2. a caller killed in mid-flight leaves the others served.
# Usage: gw_workers.sh CAUSEWAYD CW_PING CWCTL TEST_GW_SEQ
. "$(dirname "$0")/gw_lib.sh"
SEQ=$4
N=${GW_WORKERS_CALLS:-3000}

start_seq() {
    local name=$1 uri=$2
    rm -f "$T/$name.addr"
    "$SEQ" serve "$uri" "$T/$name.addr" >"$T/$name.out" 2>"$T/$name.log" &
    eval "${name}_PID=$!"
    PIDS="$PIDS $!"
    wait_for test -s "$T/$name.addr" || fail "server $name did not start: $(cat "$T/$name.log")"
    eval "$name=\$(cat \"\$T/\$name.addr\")"
}

# forwarded_past N: wait (bounded) until the gateway has forwarded more
# than N RPCs in all.
forwarded() { json_num "$("$CWCTL" --admin "$gw_admin" stats --json)" forwarded; }
forwarded_past() {
    local n
    for _ in $(seq 600); do
        n=$(forwarded)
        [ "${n:-0}" -gt "$1" ] && return 0
        sleep 0.05 # sleep-ok: poll step of a bounded wait for a counter
    done
    return 1
}

start_seq s1 "shm://$TAG-s1"
start_seq s2 "shm://$TAG-s2"
cat >"$T/gw.yaml" <<YAML
gateway: { name: workers, admin: "127.0.0.1:$(free_port)", threads: 4 }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
YAML
start_gw gw "$T/gw.yaml"
grep -q "network tcp0 listening on .* (4 threads)" "$T/gw.log" ||
    fail "tcp0 not served by 4 workers: $(cat "$T/gw.log")"
pass "tcp0 and shm0 each served by 4 workers"

# 1. Eight callers over two servers, with reloads while they run.
cpids=""
for i in 1 2 3 4 5 6 7 8; do
    srv=$s1
    [ $((i % 2)) = 0 ] && srv=$s2
    timeout 120 "$SEQ" call "$srv@$gw_tcp0" "$i" "$N" >"$T/c$i.out" 2>&1 &
    cpids="$cpids $!"
done
# A ninth caller that runs until it is killed after the reloads, so that
# each reload happens under load even where the eight finish quickly.
"$SEQ" call "$s1@$gw_tcp0" 9 1000000 >"$T/c9.out" 2>&1 &
keeper=$!
PIDS="$PIDS $keeper"
for r in 1 2 3; do
    # Each reload while calls are still being forwarded.
    before=$(forwarded)
    forwarded_past $((before + 100)) ||
        fail "reload $r: the load is not running (forwarded stays at $before)"
    "$CWCTL" --admin "$gw_admin" reload >"$T/reload$r.out" 2>&1 ||
        fail "reload $r: $(cat "$T/reload$r.out")"
done
pass "3 reloads while the callers ran"
kill -KILL "$keeper"
wait "$keeper" 2>/dev/null
# shellcheck disable=SC2086 # the pids, one word each
wait_count $cpids
n=$WAIT_OK
[ $n = 8 ] || fail "$n of 8 callers succeeded: $(cat "$T"/c*.out)"
pass "8 callers x $N calls, none failed"
stats=$("$CWCTL" --admin "$gw_admin" stats --json)
fwd=$(json_num "$stats" forwarded)
hand=$(json_num "$stats" handoffs)
[ "$fwd" -ge $((8 * N)) ] || fail "forwarded $fwd of $((8 * N)): $stats"
workers=$(printf '%s' "$stats" | grep -o '"workers":\[[^]]*\]')
nw=$(printf '%s' "$workers" | grep -o '"forwarded":[0-9]*' | cut -d: -f2 | awk '$1 > 0' | wc -l)
[ "$nw" = 4 ] || fail "not every worker forwarded: $workers"
pass "every worker forwarded: $workers"
[ $((hand * 100)) -lt "$fwd" ] || fail "handoffs $hand of $fwd forwarded (>= 1%)"
pass "handoffs $hand of $fwd forwarded"

# 2. A caller killed in mid-flight; the others are served.
cpids=""
for i in 11 12 13; do
    timeout 120 "$SEQ" call "$s1@$gw_tcp0" "$i" "$N" >"$T/c$i.out" 2>&1 &
    cpids="$cpids $!"
done
# Not under timeout(1): the kill must reach the caller itself, not a
# wrapper that would leave it running (cleanup stops it if we fail first).
"$SEQ" call "$s2@$gw_tcp0" 14 1000000 >"$T/c14.out" 2>&1 &
victim=$!
PIDS="$PIDS $victim"
before=$(forwarded)
forwarded_past $((before + 500)) ||
    fail "the second load did not start"
kill -KILL "$victim"
wait "$victim" 2>/dev/null
# shellcheck disable=SC2086 # the pids, one word each
wait_count $cpids
n=$WAIT_OK
[ $n = 3 ] || fail "after a caller was killed, $n of 3 others succeeded: $(cat "$T"/c1[123].out)"
pass "a caller killed in mid-flight; the 3 others made all their calls"

# Every server saw each caller's requests in order (it exits 1 if not).
for s in s1 s2; do
    eval "stop_pid \$${s}_PID"
    [ "$STOP_RC" = 0 ] || fail "server $s: $(cat "$T/$s.out") $(head -n 5 "$T/$s.log")"
    pass "server $s: $(cat "$T/$s.out")"
done
gw_stop_clean gw

# gateway.threads: auto (the default): one worker per CPU the process may
# run on, at most 16: one under taskset -c 0, nproc (this process's CPUs)
# without it.
nworkers() {
    "$CWCTL" --admin "$1" stats --json | grep -o '"workers":\[[^]]*\]' |
        grep -o '"forwarded"' | wc -l
}
want=$(nproc)
[ "$want" -gt 16 ] && want=16
start_echo echo "shm://$TAG-echo"
tcp_shm_gw auto1 "admin: \"127.0.0.1:$(free_port)\"" taskset -c 0
n=$(nworkers "$auto1_admin")
[ "$n" = 1 ] || fail "threads auto under taskset -c 0: $n workers"
ping_expect "auto, one CPU: through the gateway" CW_OK -c 3 "$echo@$auto1_tcp0"
gw_stop_clean auto1
tcp_shm_gw autoall "admin: \"127.0.0.1:$(free_port)\""
n=$(nworkers "$autoall_admin")
[ "$n" = "$want" ] || fail "threads auto on $(nproc) CPUs: $n workers, not $want"
gw_stop_clean autoall
pass "threads: auto: 1 worker on one CPU, $want on $(nproc)"

# More workers than networks may be configured (GW_MAX_NETS, 8): auto
# gives 16 on a bridge node of 16 CPUs.  Each staging slot holds a bulk
# handle per worker; its array had been sized by networks, so a ninth
# worker wrote past it at start and the gateway aborted on exit (double
# free), found on a 16-core machine.  Nine workers (the first past the
# old bound) and a small staging pool keep the start short under TSan.
cat >"$T/wide.yaml" <<YAML
gateway: { name: wide, admin: "127.0.0.1:$(free_port)", threads: 9 }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-wide" }
buffers: { chunk: 1MiB, staging: 8MiB }
YAML
start_gw wide "$T/wide.yaml"
n=$(nworkers "$wide_admin")
[ "$n" = 9 ] || fail "threads: 9 gave $n workers"
for i in 1 2 3 4 5 6 7 8 9 10; do
    ping_expect "threads 9, caller $i: through the gateway" CW_OK -c 2 "$echo@$wide_tcp0"
done
per=$("$CWCTL" --admin "$wide_admin" stats --json | grep -o '"workers":\[[^]]*\]')
[ "$(printf '%s' "$per" | grep -o '"forwarded":[1-9]' | wc -l)" = 9 ] ||
    fail "not every one of the 9 workers forwarded: $per"
gw_stop_clean wide
pass "threads: 9: every worker served, stopped cleanly"
