#!/bin/bash
# The admin interface on a non-loopback address (gateway.admin 0.0.0.0):
# reads (status, stats, metrics, HTTP GET) answer a client on another
# address; reload and drain are refused to it (cwctl exit 1, HTTP 403,
# logged) and the gateway keeps serving; from loopback they work.  All in
# a network namespace of its own with a veth pair inside it (10.232.0.1),
# so that a "remote" client exists without any traffic leaving it.
# Skips (77) where namespaces cannot be created.
. "$(dirname "$0")/gw_lib.sh"

ns=cwad$$
if ! ns_make "$ns"; then
    echo "SKIP: $NS_WHY"
    exit 77
fi
nx() { ip netns exec "$ns" "$@"; }
if ! why=$(nx ip link add va type veth peer name vb 2>&1); then
    echo "SKIP: cannot create veth pairs here: ip link add ... type veth: $why"
    exit 77
fi
nx ip addr add 10.232.0.1/24 dev va && nx ip link set va up &&
    nx ip link set vb up || fail "veth up in $ns"
# Small TCP send buffers in this namespace (the setting is per namespace),
# so that an answer of a few hundred KB to a client that does not read
# fills them, as a far larger one would with the defaults (up to 4 MiB).
nx sysctl -q -w net.ipv4.tcp_wmem="4096 16384 65536" ||
    fail "cannot set net.ipv4.tcp_wmem in $ns"
REMOTE=10.232.0.1:9464
LOCAL=127.0.0.1:9464

start_echo echo "shm://$TAG-echo" 0 ip netns exec "$ns"
# 2000 routes: the answer to "routes" (about 250 KB) outgrows the socket
# buffers of a client that does not read (below).
{
    cat <<YAML
gateway: { name: gw, admin: "0.0.0.0:9464", drain_grace: 2s }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
routes:
YAML
    for i in $(seq 0 1999); do
        echo "  - { dest: \"ofi+tcp://10.9.$((i / 250)).$((i % 250 + 1)):7000\", via: tcp0 }"
    done
} >"$T/gw.yaml"
start_gw gw "$T/gw.yaml" ip netns exec "$ns"
nx "$CW_PING" -q -c 5 "$echo@$gw_tcp0" >"$T/ping.out" ||
    fail "echo through the gateway: $(cat "$T/ping.out")"

# Reads from the other address.
nx "$CWCTL" --admin "$REMOTE" status >"$T/status.out" || fail "remote status"
grep -q "^state *serving" "$T/status.out" || fail "status: $(cat "$T/status.out")"
nx "$CWCTL" --admin "$REMOTE" metrics >"$T/metrics.txt" || fail "remote metrics"
python3 "$(dirname "$0")/metrics_check.py" 'causeway_gateway_rpcs_total{result="forwarded"}=5' \
    <"$T/metrics.txt" >"$T/metrics.check" || fail "remote metrics: $(cat "$T/metrics.check")"
nx bash -c "exec 3<>/dev/tcp/10.232.0.1/9464; printf 'GET /stats?json HTTP/1.0\r\n\r\n' >&3; timeout 5 cat <&3" >"$T/get.out"
head -n 1 "$T/get.out" | grep -q "^HTTP/1.0 200" || fail "remote GET: $(head -n 3 "$T/get.out")"
pass "reads answer a client on 10.232.0.1: status, metrics, HTTP GET"

# Hostile admin clients do not stall forwarding: one sends a command and
# then writes without pause; six ask for the routes (about 250 KB) with a
# 1 KiB receive buffer and never read.  RPCs through the gateway, each
# with a 500 ms deadline, go on meanwhile; the gateway closes the writer.
cat >"$T/hostile.py" <<'PY'
import socket, sys, time
host, port, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
if mode == "noread":
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
s.connect((host, port))
s.sendall(b"status\n" if mode == "stream" else b"routes\n")
start, junk = time.time(), b"x" * 65536
if mode == "noread":
    time.sleep(4)
    print("held")
    sys.exit(0)
if mode == "slow":
    # Reads the answer only after 1 s, and then all of it.
    time.sleep(1)
    data = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        data += b
    lines = data.decode().splitlines()
    print("%d bytes, %d lines, first %r" % (len(data), len(lines), lines[0]))
    sys.exit(0 if lines[0] == "OK" and len(lines) > 2000 else 1)
while time.time() - start < 8:
    try:
        s.send(junk)
    except OSError:
        print("closed after %.1f s" % (time.time() - start))
        sys.exit(0)
print("still open after 8 s")
sys.exit(1)
PY
nx python3 "$T/hostile.py" 10.232.0.1 9464 stream >"$T/stream.out" 2>&1 &
h1=$!
# Six that do not read: each answer was once written with a blocking
# send bounded at 1 s, on the thread that forwards, so together they held
# forwarding for 6 s.
hn=""
for i in 1 2 3 4 5 6; do
    nx python3 "$T/hostile.py" 10.232.0.1 9464 noread >"$T/noread$i.out" 2>&1 &
    hn="$hn $!"
done
nx python3 "$T/hostile.py" 10.232.0.1 9464 slow >"$T/slow.out" 2>&1 &
h3=$!
PIDS="$PIDS $h1 $hn $h3"
# The gateway has taken them on: the answers of the six that do not read
# wait in its send queues.
stuck_answers() {
    [ "$(nx ss -Htn state established '( sport = :9464 )' | awk '$2 > 0' | wc -l)" -ge 6 ]
}
wait_for stuck_answers ||
    fail "admin answers not held by the clients: $(nx ss -tn state established '( sport = :9464 )')"
t0=$(date +%s%N)
nx timeout 20 "$CW_PING" -q -c 40 -i 50 -t 500 "$echo@$gw_tcp0" >"$T/ping.out" ||
    fail "echo while admin clients misbehave: $(cat "$T/ping.out")"
t1=$(date +%s%N)
wait "$h1" || fail "writing admin client: $(cat "$T/stream.out")"
for h in $hn; do wait "$h"; done
wait "$h3" || fail "slow admin client: $(cat "$T/slow.out")"
ms=$(((t1 - t0) / 1000000))
[ "$ms" -lt 10000 ] || fail "40 RPCs took $ms ms while admin clients misbehaved"
nx "$CWCTL" --admin "$LOCAL" status | grep -q "^state *serving" ||
    fail "admin interface after hostile clients"
pass "hostile admin clients: 40 RPCs 50 ms apart in $ms ms meanwhile, none late; writer $(cat "$T/stream.out"); slow reader got the answer, $(cat "$T/slow.out"); admin still answers"

# Changes from the other address: refused, nothing happens.
for cmd in reload drain; do
    nx "$CWCTL" --admin "$REMOTE" "$cmd" >"$T/$cmd.out" 2>&1
    rc=$?
    [ "$rc" = 1 ] && grep -q "forbidden: $cmd is accepted from this host only" "$T/$cmd.out" ||
        fail "remote $cmd: exit $rc: $(cat "$T/$cmd.out")"
done
nx bash -c "exec 3<>/dev/tcp/10.232.0.1/9464; printf 'POST /drain HTTP/1.0\r\n\r\n' >&3; timeout 5 cat <&3" >"$T/post.out"
head -n 1 "$T/post.out" | grep -q "^HTTP/1.0 403" || fail "remote POST /drain: $(head -n 3 "$T/post.out")"
grep -q "admin: reload from a remote address refused" "$T/gw.log" ||
    fail "refusal not logged: $(tail -n 5 "$T/gw.log")"
nx "$CWCTL" --admin "$LOCAL" status | grep -q "^state *serving" ||
    fail "gateway no longer serving after refused commands"
nx "$CW_PING" -q -c 5 "$echo@$gw_tcp0" >"$T/ping.out" ||
    fail "echo after refused commands: $(cat "$T/ping.out")"
pass "reload and drain from 10.232.0.1 refused (cwctl exit 1, HTTP 403, logged); still serving"

# The same from loopback: done.
nx "$CWCTL" --admin "$LOCAL" reload >"$T/reload.out" || fail "local reload: $(cat "$T/reload.out")"
nx "$CWCTL" --admin "$LOCAL" drain >"$T/drain.out" || fail "local drain: $(cat "$T/drain.out")"
stop_pid "$gw_PID"
[ "$STOP_RC" = 0 ] || fail "gateway exit status $STOP_RC after the local drain"
pass "reload and drain from 127.0.0.1 done; the gateway exited 0"
