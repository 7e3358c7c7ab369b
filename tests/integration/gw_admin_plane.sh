#!/bin/bash
# The admin plane (docs/cwctl.md, docs/gateway.md "Admin interface"):
#   - gateway.admin_socket: a Unix socket created with admin_socket_mode and
#     admin_socket_group; root is served, an unprivileged user is refused by
#     the file's mode and served where its group lets it in; a stale socket
#     file is replaced, a live one or another file is not; removed on exit;
#   - gateway.admin_token_file: the TCP endpoint answers 401 / ERR without
#     the token (HTTP Bearer or an "auth" line), cwctl sends it from
#     --token-file or $CAUSEWAY_ADMIN_TOKEN_FILE; a token file missing,
#     empty or readable by others stops the start and fails --check;
#   - every HTTP answer's status and Content-Type; percent-decoded query
#     arguments, malformed escapes answered 400;
#   - explain --json, reload --json (reloaded, restart needed, failed);
#   - config [--json]: the running configuration (as --dump), its file and
#     load time, updated by a successful reload;
#   - peers [--json]: clients and next hops with in-flight counts, last
#     activity and health, cut at --limit;
#   - per-worker forwarded counters in stats and /metrics.
# Every --json answer is parsed (python3's json module).
. "$(dirname "$0")/gw_lib.sh"

# jval EXPR < JSON: EXPR of the parsed document d (python), printed (a
# string as it is, anything else as Python writes it); fails if the input
# is not JSON.
jval() {
    python3 -c 'import json, sys
d = json.load(sys.stdin)
v = eval("(" + sys.argv[1] + ")")
print(v if isinstance(v, str) else repr(v))' "$1"
}

# http METHOD PATH [TOKEN]: the raw HTTP/1.0 answer of the TCP endpoint.
http() {
    local fd auth=""
    [ -n "${3:-}" ] && auth="Authorization: Bearer $3"$'\r\n'
    exec {fd}<>"/dev/tcp/${gw_admin%:*}/${gw_admin##*:}" || return 1
    printf '%s %s HTTP/1.0\r\nHost: causeway\r\n%s\r\n' "$1" "$2" "$auth" >&"$fd"
    timeout 5 cat <&"$fd"
    exec {fd}>&-
}

# http_expect METHOD PATH TOKEN STATUS TYPE: the answer's status line and
# Content-Type are these; its body is left in $T/http.body.
http_expect() {
    local got type
    http "$1" "$2" "$3" >"$T/http.raw" || fail "$1 $2: cannot connect"
    got=$(head -n 1 "$T/http.raw" | tr -d '\r')
    type=$(grep -i -m1 '^Content-Type:' "$T/http.raw" | tr -d '\r' | cut -d' ' -f2-)
    sed '1,/^\r$/d' "$T/http.raw" >"$T/http.body"
    [ "$got" = "HTTP/1.0 $4" ] || fail "$1 $2: got '$got', expected 'HTTP/1.0 $4': $(head -c 300 "$T/http.body")"
    [ "$type" = "$5" ] || fail "$1 $2: Content-Type '$type', expected '$5'"
}

TOKEN=tok-$$-$RANDOM$RANDOM
umask 077
printf '%s\n' "$TOKEN" >"$T/token"
SOCK_DIR=$T/run
mkdir "$SOCK_DIR"
SOCK=$SOCK_DIR/admin.sock

start_echo echo "shm://$TAG-echo"
# A slow echo, so that requests stay in flight while peers is asked.
start_echo slow "shm://$TAG-slow" 3000
# A next-hop gateway that does not answer: health checks fail on it.
dead_hop="ofi+tcp://127.0.0.1:$(free_port)"

write_cfg() { # FILE MODE [EXTRA ROUTE LINE]
    cat >"$1" <<YAML
gateway: { name: gw, admin: "127.0.0.1:0", admin_socket: "$SOCK", admin_socket_mode: "$2", admin_token_file: "$T/token", drain_grace: 2s }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
routes:
  - { dest: "ofi+tcp://10.77.0.0/16", gateway: "$dead_hop" }
${3:-}
health: { interval: 200ms, timeout: 100ms }
YAML
    gw_cfg_threads "$1"
}

# ---- the token file: missing, empty, readable by others ----------------
for case in missing empty others; do
    tf=$T/token-$case
    case $case in
    missing) want="cannot open token file \"$tf\"" ;;
    empty) : >"$tf"; want="token file \"$tf\" is empty" ;;
    others) echo "$TOKEN" >"$tf"; chmod 0644 "$tf"
            want="token file \"$tf\" is accessible to other users (mode 0644)" ;;
    esac
    write_cfg "$T/bad-$case.yaml" 0660
    sed -i "s|admin_token_file: \"$T/token\"|admin_token_file: \"$tf\"|" "$T/bad-$case.yaml"
    "$CAUSEWAYD" --check -c "$T/bad-$case.yaml" >"$T/check-$case.out" 2>&1 &&
        fail "--check accepted a token file that is $case"
    grep -qF "$want" "$T/check-$case.out" ||
        fail "--check, token file $case: $(cat "$T/check-$case.out")"
    timeout 20 "$CAUSEWAYD" -c "$T/bad-$case.yaml" >"$T/start-$case.out" 2>&1
    rc=$?
    [ "$rc" != 0 ] && [ "$rc" != 124 ] ||
        fail "the gateway started (or hung: $rc) with a token file that is $case"
    grep -qF "$want" "$T/start-$case.out" ||
        fail "start, token file $case: $(tail -n 3 "$T/start-$case.out")"
    ! grep -qE "$SANITIZER_RE" "$T/start-$case.out" ||
        fail "start, token file $case: sanitizer report: $(cat "$T/start-$case.out")"
    [ ! -e "$SOCK" ] || fail "a gateway that did not start left $SOCK"
done
pass "a token file missing, empty or readable by others: --check and the start fail, naming it"

# ---- the Unix socket -----------------------------------------------------
write_cfg "$T/gw.yaml" 0660
start_gw gw "$T/gw.yaml"
[ "${gw_admin_socket:-}" = "$SOCK" ] || fail "no admin_socket ready line ($SOCK)"
[ -S "$SOCK" ] || fail "$SOCK is not a socket"
[ "$(stat -c %a "$SOCK")" = 660 ] || fail "$SOCK has mode $(stat -c %a "$SOCK"), not 660"
for a in "unix:$SOCK" "$SOCK"; do
    "$CWCTL" --admin "$a" status --json >"$T/status.json" || fail "status over $a"
    [ "$(jval 'd["state"]' <"$T/status.json")" = serving ] || fail "status over $a: $(cat "$T/status.json")"
done
pass "admin_socket $SOCK: mode 0660, the owner is served (unix:PATH and PATH)"

if [ "$(id -u)" != 0 ]; then
    skip_case "unprivileged user" "not root: cannot run a command as another user"
elif ! id nobody >/dev/null 2>&1 || ! getent group nogroup >/dev/null; then
    skip_case "unprivileged user" "no user nobody or group nogroup here"
elif command -v setpriv >/dev/null; then
    as_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups "$@"; }
elif command -v runuser >/dev/null; then
    as_nobody() { runuser -u nobody -g nogroup -- "$@"; }
else
    skip_case "unprivileged user" "neither setpriv nor runuser here"
fi
if declare -F as_nobody >/dev/null; then
    # The directories let anyone through: the socket file's mode decides.
    chmod 0711 "$T"
    chmod 0755 "$SOCK_DIR"
    as_nobody true || fail "cannot run a command as nobody"
    # nobody may not be able to reach the build tree (a checkout under a
    # 0700 directory, as mktemp -d makes): it runs a copy of cwctl and of
    # the build tree's libraries it loads, from a directory it can read.
    mkdir -m 0755 "$T/nb"
    cp "$CWCTL" "$T/nb/cwctl"
    ldd "$CWCTL" | awk -v b="$(cd "$(dirname "$CWCTL")/.." && pwd)" \
        'index($3, b) == 1 || index($3, "/..") > 0 { print $3 }' |
        while read -r lib; do cp "$lib" "$T/nb/"; done
    chmod -R a+rX "$T/nb"
    NB_CWCTL=$T/nb/cwctl
    as_nobody env LD_LIBRARY_PATH="$T/nb" "$NB_CWCTL" --help >/dev/null 2>&1 ||
        fail "nobody cannot run a copy of cwctl: $(as_nobody env LD_LIBRARY_PATH="$T/nb" "$NB_CWCTL" --help 2>&1 | tail -n 2)"
    as_nobody env LD_LIBRARY_PATH="$T/nb" "$NB_CWCTL" --admin "$SOCK" drain >"$T/nobody.out" 2>&1
    rc=$?
    [ "$rc" = 3 ] && grep -q "permission denied" "$T/nobody.out" ||
        fail "nobody was not refused by the socket's mode (exit $rc): $(cat "$T/nobody.out")"
    "$CWCTL" --admin "$SOCK" status | grep -q "^state *serving" ||
        fail "the gateway does not serve after nobody's drain"
    pass "nobody is refused by the socket file's mode 0660 (cwctl exit 3, permission denied), nothing drained"
    # The same user, let in by the socket's group.
    cat >"$T/gw2.yaml" <<YAML
gateway: { name: gw2, admin: "", admin_socket: "$SOCK_DIR/gw2.sock", admin_socket_mode: "0660", admin_socket_group: nogroup }
networks:
  - { name: shm0, address: "shm://$TAG-gw2" }
YAML
    start_gw gw2 "$T/gw2.yaml"
    [ "$(stat -c '%a %G' "$SOCK_DIR/gw2.sock")" = "660 nogroup" ] ||
        fail "gw2.sock: $(stat -c '%a %G' "$SOCK_DIR/gw2.sock"), expected 660 nogroup"
    as_nobody env LD_LIBRARY_PATH="$T/nb" "$NB_CWCTL" --admin "$SOCK_DIR/gw2.sock" \
        status --json >"$T/nobody2.json" ||
        fail "nobody (group nogroup) refused by a socket of group nogroup"
    [ "$(jval 'd["name"]' <"$T/nobody2.json")" = gw2 ] || fail "gw2 status: $(cat "$T/nobody2.json")"
    stop_pid "$gw2_PID"
    [ ! -e "$SOCK_DIR/gw2.sock" ] || fail "gw2 left its socket file on exit"
    pass "admin_socket_group nogroup: nobody is served through the group; the file is removed on exit"
    chmod 0700 "$T"
fi

# A live socket is not taken over; a regular file is not replaced.
sed "s/shm:\/\/$TAG-gw\"/shm:\/\/$TAG-gw3\"/; s/name: gw,/name: gw3,/" "$T/gw.yaml" >"$T/gw3.yaml"
timeout 20 "$CAUSEWAYD" -c "$T/gw3.yaml" >"$T/gw3.out" 2>&1 && fail "a second gateway took over a live admin socket"
grep -q "another process listens on it" "$T/gw3.out" || fail "second gateway: $(tail -n 3 "$T/gw3.out")"
! grep -qE "$SANITIZER_RE" "$T/gw3.out" || fail "second gateway: sanitizer report: $(cat "$T/gw3.out")"
"$CWCTL" --admin "$SOCK" status | grep -q "^gateway *gw " || fail "the first gateway lost its socket"
pass "a second gateway on the same admin_socket refuses to start; the first keeps it"
# A start that fails earlier, on a network (its shm name is gw's), stops
# cleanly too (it read a configuration not yet installed: UBSan).
sed "s|admin_socket: \"$SOCK\"|admin_socket: \"$SOCK_DIR/gw4.sock\"|; s|name: gw,|name: gw4,|" "$T/gw.yaml" >"$T/gw4.yaml" ||
    fail "cannot write gw4.yaml"
timeout 20 "$CAUSEWAYD" -c "$T/gw4.yaml" >"$T/gw4.out" 2>&1 && fail "a gateway started on a taken shm name"
grep -q "cannot listen on shm://$TAG-gw" "$T/gw4.out" || fail "taken shm name: $(tail -n 3 "$T/gw4.out")"
! grep -qE "$SANITIZER_RE" "$T/gw4.out" || fail "a failed start: sanitizer report: $(cat "$T/gw4.out")"
[ ! -e "$SOCK_DIR/gw4.sock" ] || fail "a gateway that failed on a network left its admin socket"
pass "a start that fails on a network exits non-zero with no sanitizer report and no socket file"

# ---- the token on the TCP endpoint ----------------------------------------
"$CWCTL" --admin "$gw_admin" status >"$T/notoken.out" 2>&1
rc=$?
[ "$rc" = 1 ] && grep -q "unauthorized" "$T/notoken.out" || fail "no token: exit $rc: $(cat "$T/notoken.out")"
n0=$(grep -c "without the admin token refused" "$T/gw.log")
[ "$n0" -ge 1 ] || fail "the refused request was not logged"
"$CWCTL" --admin "$gw_admin" --token-file "$T/token" status --json >"$T/tok.json" || fail "cwctl --token-file"
jval 'd["state"]' <"$T/tok.json" >/dev/null || fail "status --json with the token: $(cat "$T/tok.json")"
CAUSEWAY_ADMIN_TOKEN_FILE=$T/token "$CWCTL" --admin "$gw_admin" stats --json >"$T/tok2.json" ||
    fail "cwctl with \$CAUSEWAY_ADMIN_TOKEN_FILE"
jval 'd["forwarded"]' <"$T/tok2.json" >/dev/null || fail "stats --json: $(cat "$T/tok2.json")"
exec {fd}<>"/dev/tcp/${gw_admin%:*}/${gw_admin##*:}" || fail "connect $gw_admin"
printf 'auth %s\nstatus json\n' "$TOKEN" >&"$fd"
timeout 5 cat <&"$fd" >"$T/line.out"
exec {fd}>&-
head -n 1 "$T/line.out" | grep -qx OK || fail "line protocol with 'auth': $(head -n 2 "$T/line.out")"
sed 1d "$T/line.out" | jval 'd["name"]' >/dev/null || fail "line protocol body: $(cat "$T/line.out")"
http_expect GET /status "" "401 Unauthorized" "text/plain; charset=utf-8"
grep -qi '^WWW-Authenticate: Bearer' "$T/http.raw" || fail "401 without WWW-Authenticate"
http_expect GET /status "x$TOKEN" "401 Unauthorized" "text/plain; charset=utf-8"
http_expect GET /status "$TOKEN" "200 OK" "text/plain; charset=utf-8"
pass "TCP endpoint: no or a wrong token -> 401 / ERR unauthorized (logged); the token by --token-file, \$CAUSEWAY_ADMIN_TOKEN_FILE, 'auth' line, Bearer header"

CW="$CWCTL --admin $SOCK"

# ---- Content-Type and status of every kind of HTTP answer -----------------
http_expect GET /metrics "$TOKEN" "200 OK" "text/plain; version=0.0.4; charset=utf-8"
python3 "$(dirname "$0")/metrics_check.py" <"$T/http.body" >"$T/metrics.check" ||
    fail "/metrics: $(cat "$T/metrics.check")"
for p in "/stats?json" "/status?json" "/routes?json" "/services?json" "/config?json" "/peers?json" \
         "/explain?json&dest=shm%3A%2F%2F$TAG-echo"; do
    http_expect GET "$p" "$TOKEN" "200 OK" "application/json"
    jval 'type(d).__name__' <"$T/http.body" >/dev/null || fail "GET $p: not JSON: $(head -c 300 "$T/http.body")"
done
for p in /status /stats /routes /services /config /peers /ready "/explain?shm://$TAG-echo"; do
    http_expect GET "$p" "$TOKEN" "200 OK" "text/plain; charset=utf-8"
done
http_expect GET /nosuch "$TOKEN" "404 Not Found" "text/plain; charset=utf-8"
http_expect GET /reload "$TOKEN" "405 Method Not Allowed" "text/plain; charset=utf-8"
http_expect GET /drain "$TOKEN" "405 Method Not Allowed" "text/plain; charset=utf-8"
http_expect GET "/explain?dest=shm%3" "$TOKEN" "400 Bad Request" "text/plain; charset=utf-8"
grep -q "malformed percent escape" "$T/http.body" || fail "400 body: $(cat "$T/http.body")"
http_expect GET "/explain?dest=shm%zz%2F" "$TOKEN" "400 Bad Request" "text/plain; charset=utf-8"
http_expect GET "/explain?dest=shm%20x" "$TOKEN" "400 Bad Request" "text/plain; charset=utf-8"
http_expect GET "/explain?json" "$TOKEN" "400 Bad Request" "text/plain; charset=utf-8"
pass "HTTP: 200/401/404/405/400 answers each with its Content-Type (Prometheus 0.0.4, application/json, text/plain); malformed escapes 400"

# ---- explain --json: cwctl and a percent-encoded HTTP query agree ---------
$CW explain --json "shm://$TAG-echo" >"$T/explain.json" || fail "explain --json"
[ "$(jval 'd["result"], d["kind"], d["nexthop"]' <"$T/explain.json")" = "('route', 'via', 'shm0')" ] ||
    fail "explain --json: $(cat "$T/explain.json")"
http_expect GET "/explain?json&dest=shm%3A%2F%2F$TAG-echo" "$TOKEN" "200 OK" "application/json"
cmp -s "$T/http.body" "$T/explain.json" || fail "HTTP explain (decoded) differs: $(cat "$T/http.body")"
$CW explain --json "ofi+tcp://10.77.1.2:5" | jval 'd["matches"][0]["routes"][0]["nexthop"]' >"$T/ex2" ||
    fail "explain --json of a gateway route"
[ "$(cat "$T/ex2")" = "$dead_hop" ] || fail "explain --json: next hop $(cat "$T/ex2"), expected $dead_hop"
$CW explain --json "::bad::" | jval 'd["result"]' | grep -qx invalid || fail "explain --json of a bad address"
pass "explain --json: route, kind, next hop, matches; the HTTP query shm%3A%2F%2F... decodes to the same answer"

# ---- config [--json] and reload --json ------------------------------------
"$CAUSEWAYD" --dump -c "$T/gw.yaml" >"$T/dump.yaml" || fail "causewayd --dump"
$CW config >"$T/config.txt" || fail "cwctl config"
head -n 1 "$T/config.txt" | grep -qx "# source: $(realpath "$T/gw.yaml")" || fail "config: $(head -n 2 "$T/config.txt")"
sed -n 2p "$T/config.txt" | grep -qE '^# loaded: [0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:[0-9]{2}Z \(0 reloads\)$' ||
    fail "config: $(sed -n 2p "$T/config.txt")"
sed 1,2d "$T/config.txt" | diff - "$T/dump.yaml" >"$T/config.diff" || fail "config differs from --dump: $(cat "$T/config.diff")"
$CW config --json >"$T/config.json" || fail "config --json"
[ "$(jval 'd["sources"], len(d["config"]["routes"]), d["config"]["gateway"]["admin_socket_mode"]' <"$T/config.json")" = \
  "(['$(realpath "$T/gw.yaml")'], 1, '0660')" ] || fail "config --json: $(head -c 400 "$T/config.json")"
t0=$(jval 'd["loaded_at_unix"]' <"$T/config.json")
pass "config: the running configuration as --dump writes it, with its source and ISO-8601 load time; --json parses"

write_cfg "$T/gw.yaml" 0660 '  - { dest: "ofi+tcp://10.78.0.0/16", via: tcp0 }'
$CW reload --json >"$T/reload.json" || fail "reload --json: exit $?: $(cat "$T/reload.json")"
[ "$(jval 'd["result"], d["routes"], d["restart_pending"]' <"$T/reload.json")" = "('reloaded', 2, [])" ] ||
    fail "reload --json: $(cat "$T/reload.json")"
$CW config --json >"$T/config2.json" || fail "config --json after a reload"
[ "$(jval 'len(d["config"]["routes"]), d["reloads"], d["loaded_at_unix"] >= '"$t0" <"$T/config2.json")" = "(2, 1, True)" ] ||
    fail "config after a reload: $(head -c 400 "$T/config2.json")"
write_cfg "$T/gw.yaml" 0600 '  - { dest: "ofi+tcp://10.78.0.0/16", via: tcp0 }'
$CW reload --json >"$T/reload.json" 2>"$T/reload.err"
rc=$?
[ "$rc" = 4 ] || fail "reload with a restart-only change: exit $rc, expected 4"
[ "$(jval 'd["result"], d["restart_pending"]' <"$T/reload.json")" = "('restart_needed', ['gateway.admin_socket_mode'])" ] ||
    fail "reload --json, restart needed: $(cat "$T/reload.json")"
grep -q "restart needed" "$T/reload.err" || fail "reload: no reason on stderr: $(cat "$T/reload.err")"
echo "routes: [ { dest: broken" >"$T/gw.yaml"
$CW reload --json >"$T/reload.json" 2>"$T/reload.err"
rc=$?
[ "$rc" = 1 ] || fail "reload of a broken file: exit $rc, expected 1"
[ "$(jval 'd["result"], d["reload_failures"]' <"$T/reload.json")" = "('failed', 1)" ] ||
    fail "reload --json, failed: $(cat "$T/reload.json")"
$CW config --json | jval 'len(d["config"]["routes"]), d["reloads"]' | grep -qx "(2, 2)" ||
    fail "a failed reload changed what config shows"
write_cfg "$T/gw.yaml" 0660
http "POST" "/reload?json" "$TOKEN" >"$T/http.raw"
head -n 1 "$T/http.raw" | tr -d '\r' | grep -qx "HTTP/1.0 200 OK" || fail "POST /reload?json: $(head -n 1 "$T/http.raw")"
grep -qix "Content-Type: application/json"$'\r' "$T/http.raw" || fail "POST /reload?json: not application/json"
sed '1,/^\r$/d' "$T/http.raw" | jval 'd["result"], d["restart_pending"]' | grep -qx "('reloaded', \[\])" ||
    fail "POST /reload?json: $(cat "$T/http.raw")"
pass "reload --json: reloaded (config shows it, reloads 1), restart_needed (exit 4, the key listed), failed (exit 1, config unchanged); POST /reload?json"

# ---- peers --------------------------------------------------------------
ping_expect "echo through the gateway" CW_OK -c 20 "$echo@$gw_tcp0"
"$CW_PING" -q -c 2 -n 2 -t 20000 "$slow@$gw_tcp0" >"$T/slow.out" 2>&1 &
slow_ping=$!
slow_inflight() {
    $CW peers --json >"$T/peers.json" &&
        jval '[h["inflight"] for h in d["nexthops"]["list"] if h["address"] == "'"$slow"'"] == [2] and
              sum(c["inflight"] for c in d["clients"]["list"]) >= 2' <"$T/peers.json" | grep -qx True
}
wait_for slow_inflight || fail "peers never showed 2 requests in flight to $slow: $(cat "$T/peers.json")"
jval '[c["last_activity"] is not None for c in d["clients"]["list"] if c["requests"] == 20 and c["inflight"] == 0]' \
    <"$T/peers.json" | grep -qx "\[True\]" || fail "peers: no idle client with the 20 requests sent: $(cat "$T/peers.json")"
jval '[h["kind"] for h in d["nexthops"]["list"] if h["address"] == "'"$echo"'" and h["last_activity"]]' \
    <"$T/peers.json" | grep -qx "\['direct'\]" || fail "peers: $echo not a direct next hop with activity: $(cat "$T/peers.json")"
dead_failing() {
    $CW peers --json >"$T/peers.json" &&
        jval '[(h["kind"], h["health"], h["pings_failed"] > 0) for h in d["nexthops"]["list"] if h["address"] == "'"$dead_hop"'"]' \
            <"$T/peers.json" | grep -qx "\[('gateway', 'failing', True)\]"
}
wait_for dead_failing || fail "peers: $dead_hop not a failing gateway: $(cat "$T/peers.json")"
$CW peers --limit 1 >"$T/peers.txt" || fail "peers --limit 1"
grep -qE '^\.\.\. and [0-9]+ more' "$T/peers.txt" || fail "peers --limit 1 did not say how many more: $(cat "$T/peers.txt")"
$CW peers --json --limit 1 | jval 'd["nexthops"]["shown"], d["nexthops"]["total"] >= 3' | grep -qx "(1, True)" ||
    fail "peers --json --limit 1"
wait "$slow_ping" || fail "the slow pings failed: $(cat "$T/slow.out")"
drained() {
    $CW peers --json | jval 'sum(h["inflight"] for h in d["nexthops"]["list"]) + sum(c["inflight"] for c in d["clients"]["list"])' | grep -qx 0
}
wait_for drained || fail "peers still shows requests in flight after they ended"
pass "peers: 2 in flight to a slow echo and from its client, the 20-request client with its last activity, direct and failing gateway next hops, --limit with the count of the rest"

# ---- per-worker forwarded counters ----------------------------------------
$CW stats --json >"$T/stats.json" || fail "stats --json"
fw=$(jval 'd["forwarded"] == sum(w["forwarded"] for w in d["workers"]) and len(d["workers"])' <"$T/stats.json")
nw=${CW_GW_THREADS:-1}
[ "$fw" = "$nw" ] || fail "stats: per-worker forwarded do not add up over $nw workers: $(head -c 300 "$T/stats.json")"
total=$(jval 'd["forwarded"]' <"$T/stats.json")
"$CWCTL" --admin "$gw_admin" --token-file "$T/token" metrics >"$T/metrics.txt" || fail "metrics"
sum=$(awk '/^causeway_gateway_worker_forwarded_total\{/ { s += $2; n++ } END { print n, s }' "$T/metrics.txt")
[ "$sum" = "$nw $total" ] || fail "metrics: workers and forwarded total '$sum', expected '$nw $total'"
pass "per-worker forwarded: $nw worker(s) add up to $total in stats and /metrics"

# ---- the socket file: removed on exit, a stale one replaced, a file kept --
stop_pid "$gw_PID"
[ ! -e "$SOCK" ] || fail "the gateway left $SOCK on exit"
python3 -c 'import socket, sys; socket.socket(socket.AF_UNIX).bind(sys.argv[1])' "$SOCK" ||
    fail "cannot make a stale socket file"
start_gw gw "$T/gw.yaml"
grep -q "removing the stale socket file" "$T/gw.log" || fail "no word of the stale socket file"
$CW status | grep -q "^state *serving" || fail "not served after replacing a stale socket"
stop_pid "$gw_PID"
echo keep >"$SOCK"
timeout 20 "$CAUSEWAYD" -c "$T/gw.yaml" >"$T/file.out" 2>&1 && fail "the gateway replaced a regular file at $SOCK"
grep -q "exists and is not a socket" "$T/file.out" || fail "regular file: $(tail -n 3 "$T/file.out")"
[ "$(cat "$SOCK")" = keep ] || fail "the regular file at $SOCK was changed"
pass "the socket file: removed on exit, a stale one replaced, a regular file left alone (the start fails)"
