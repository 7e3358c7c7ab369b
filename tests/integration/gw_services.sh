#!/bin/bash
# A service with two backends: both serve; one is killed and ejected (all
# calls still succeed); restarted on the same address, it returns.
. "$(dirname "$0")/gw_lib.sh"

start_echo b1 "shm://$TAG-b1"
start_echo b2 "shm://$TAG-b2"
cat >"$T/gw.yaml" <<YAML
gateway: { name: svcgw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
services:
  - { name: echo, backends: ["$b1", "$b2"], policy: round_robin }
health: { interval: 200ms, timeout: 200ms, eject_after: 2, recover_after: 2 }
YAML
start_gw gw "$T/gw.yaml"

backend_health() {
    "$CWCTL" --admin "$gw_admin" services --json |
        grep -o "\"address\":\"$1\",\"health\":\"[a-z]*\"" | cut -d'"' -f8
}

# The route table's state of a backend: up or ejected.
backend_state() {
    "$CWCTL" --admin "$gw_admin" services --json |
        grep -o "\"address\":\"$1\",[^}]*" |
        grep -o '"state":"[a-z]*"' | cut -d'"' -f4
}

both_healthy() {
    [ "$(backend_health "$b1")" = ok ] && [ "$(backend_health "$b2")" = ok ]
}

ping_expect "svc:echo with two backends" CW_OK -c 20 -s 0,64,65536 "svc:echo@$gw_tcp0"
wait_for both_healthy ||
    fail "backends not healthy: $("$CWCTL" --admin "$gw_admin" services)"
pass "both backends healthy"
[ "$(backend_state "$b1")" = up ] && [ "$(backend_state "$b2")" = up ] ||
    fail "backends not up in the route table: $("$CWCTL" --admin "$gw_admin" services)"
"$CWCTL" --admin "$gw_admin" services | grep -q 'STATE *INFLIGHT' ||
    fail "services table has no STATE/INFLIGHT columns"
pass "both backends up in the route table"

gw_kill "$b2_PID"
rm -f /dev/shm/causeway-"$TAG"-b2
timeout 60 "$CW_PING" -q -c 20 -t 2000 "svc:echo@$gw_tcp0" >"$T/ping.out"
ok=$(grep -o 'CW_OK=[0-9]*' "$T/ping.out" | cut -d= -f2)
[ "${ok:-0}" -ge 18 ] || fail "after the kill only ${ok:-0}/20 succeeded"
pass "backend killed: $(cat "$T/ping.out")"
wait_for sh -c "'$CWCTL' --admin '$gw_admin' services --json | grep -q '\"address\":\"$b2\",\"health\":\"failing\"'" ||
    fail "killed backend not seen failing"
pass "killed backend failing its health checks"
wait_for sh -c "'$CWCTL' --admin '$gw_admin' services --json | grep -q '\"address\":\"$b2\",[^}]*\"state\":\"ejected\"'" ||
    fail "killed backend not ejected: $("$CWCTL" --admin "$gw_admin" services)"
[ "$(backend_state "$b1")" = up ] || fail "remaining backend not up"
"$CWCTL" --admin "$gw_admin" services | grep "$b2" | grep -q ' ejected ' ||
    fail "services table does not show the backend ejected"
pass "killed backend ejected from the route table, the other still up"
# Exactly one log line says so (of the health checks and forwards that
# failed at once, only the report that crossed eject_after).
n=$(grep -c "backend $b2 out of rotation: 2 consecutive failures" "$T/gw.log")
[ "$n" = 1 ] || fail "gateway logged the ejection $n times: $(grep rotation "$T/gw.log")"
pass "the ejection logged once: $(grep -o "backend $b2 out of rotation.*" "$T/gw.log")"
metrics_expect "$gw_admin" "causeway_backend_up{service=\"echo\",backend=\"$b1\"}=1" \
    "causeway_backend_up{service=\"echo\",backend=\"$b2\"}=0"
pass "metrics: valid exposition, $b2 out ($(cat "$T/metrics.check"))"
ping_expect "all calls go to the remaining backend" CW_OK -c 20 "svc:echo@$gw_tcp0"

start_echo b2 "shm://$TAG-b2"
wait_for sh -c "'$CWCTL' --admin '$gw_admin' services --json | grep -q '\"address\":\"$b2\",\"health\":\"ok\"'" ||
    fail "restarted backend not healthy again"
pass "restarted backend passes its health checks again"
wait_for sh -c "'$CWCTL' --admin '$gw_admin' services --json | grep -q '\"address\":\"$b2\",[^}]*\"state\":\"up\"'" ||
    fail "restarted backend not back in the route table"
pass "restarted backend back up in the route table"
n=$(grep -c "backend $b2 back in rotation: 2 consecutive successes" "$T/gw.log")
[ "$n" = 1 ] || fail "gateway logged the return $n times: $(grep rotation "$T/gw.log")"
pass "the return logged once"
fwd=$("$CWCTL" --admin "$gw_admin" stats --json | grep -o '"forwarded":[0-9]*' | head -n 1 | cut -d: -f2)
metrics_expect "$gw_admin" "causeway_backend_up{service=\"echo\",backend=\"$b2\"}=1" \
    "causeway_gateway_rpcs_total{result=\"forwarded\"}=$fwd" \
    "causeway_gateway_inflight_rpcs=0"
pass "metrics: $b2 back, $fwd forwarded as in stats"
http_get "$gw_admin" /metrics >"$T/http.out" || fail "GET /metrics: no connection"
head -n 1 "$T/http.out" | grep -q "^HTTP/1.0 200" &&
    grep -qi "^Content-Type: text/plain; version=0.0.4" "$T/http.out" ||
    fail "GET /metrics: $(head -n 4 "$T/http.out")"
sed '1,/^\r*$/d' "$T/http.out" | python3 "$(dirname "$0")/metrics_check.py" >"$T/http.check" ||
    fail "GET /metrics body: $(cat "$T/http.check")"
pass "HTTP GET /metrics: 200, text/plain; version=0.0.4, $(cat "$T/http.check")"
# The process families a scraper expects, and the build's version.
for m in causeway_build_info process_start_time_seconds \
    process_cpu_seconds_total process_resident_memory_bytes process_open_fds; do
    grep -q "^$m[ {]" "$T/http.out" || fail "GET /metrics: no $m"
done
grep -q '^causeway_build_info{version="[0-9]*\.[0-9]*\.[0-9]*"} 1' "$T/http.out" ||
    fail "GET /metrics: $(grep causeway_build_info "$T/http.out")"
pass "metrics: causeway_build_info, process_start_time_seconds, process_cpu_seconds_total, process_resident_memory_bytes, process_open_fds"
# What changes the gateway is POST only: a GET of /reload or /drain is
# refused (405) and does nothing; an unknown path is 404; /ready is 200.
reloads0=$(json_num "$("$CWCTL" --admin "$gw_admin" status --json)" reloads)
for p in reload drain; do
    http_get "$gw_admin" "/$p" >"$T/http.out" || fail "GET /$p: no connection"
    head -n 1 "$T/http.out" | grep -q "^HTTP/1.0 405" &&
        grep -qi "^Allow: POST" "$T/http.out" ||
        fail "GET /$p: $(head -n 3 "$T/http.out")"
done
st=$("$CWCTL" --admin "$gw_admin" status --json)
[ "$(json_num "$st" reloads)" = "$reloads0" ] || fail "GET /reload reloaded: $st"
echo "$st" | grep -q '"state":"serving"' || fail "GET /drain changed the state: $st"
http_get "$gw_admin" /nosuch >"$T/http.out" || fail "GET /nosuch: no connection"
head -n 1 "$T/http.out" | grep -q "^HTTP/1.0 404" || fail "GET /nosuch: $(head -n 3 "$T/http.out")"
http_get "$gw_admin" /ready >"$T/http.out" || fail "GET /ready: no connection"
head -n 1 "$T/http.out" | grep -q "^HTTP/1.0 200" || fail "GET /ready: $(head -n 3 "$T/http.out")"
pass "HTTP: GET /reload and /drain 405 (Allow: POST) and nothing done, /nosuch 404, /ready 200"
ping_expect "calls after the return" CW_OK -c 20 "svc:echo@$gw_tcp0"
"$CWCTL" --admin "$gw_admin" services
