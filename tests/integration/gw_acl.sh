#!/bin/bash
# ACL: from tcp0 to shm0 only svc:echo (and a second gateway) is allowed; a
# plain target is denied with CW_DENIED and counted, also when it is
# addressed through the allowed gateway (target@gw2@gw); traffic from shm0
# has no entry at all.
# A request carrying a bulk descriptor crosses (proxy handle).  Also the
# other per-request admission check, limits.max_payload_size (1 MiB here):
# a larger argument is refused with CW_OVERFLOW, one of 1 MiB crosses.
. "$(dirname "$0")/gw_lib.sh"

start_echo echo "shm://$TAG-echo"
start_echo techo "ofi+tcp://127.0.0.1:0"
# A second gateway behind shm0, reached by an explicit hop: the ACL is
# asked about the final destination, not about the next gateway.
cat >"$T/gw2.yaml" <<YAML
gateway: { name: aclgw2, admin: "" }
networks:
  - { name: shm0, address: "shm://$TAG-gw2" }
services:
  - { name: echo, backends: ["$echo"] }
YAML
start_gw gw2 "$T/gw2.yaml"
cat >"$T/gw.yaml" <<YAML
gateway: { name: aclgw, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw" }
services:
  - { name: echo, backends: ["$echo"] }
acl:
  - { from: tcp0, to: shm0, allow: ["svc:echo", "$gw2_shm0"] }
limits: { max_payload_size: 1MiB }
YAML
start_gw gw "$T/gw.yaml"

ping_expect "allowed: svc:echo" CW_OK -c 5 "svc:echo@$gw_tcp0"
ping_expect "denied: plain target" CW_DENIED -c 5 "$echo@$gw_tcp0"
ping_expect "denied: shm0 -> tcp0 (no entry)" CW_DENIED -c 3 "$techo@$gw_shm0"
ping_expect "denied: plain target behind an allowed next gateway" CW_DENIED \
    -c 3 "$echo@$gw2_shm0@$gw_tcp0"
ping_expect "allowed: svc:echo behind an allowed next gateway" CW_OK -c 3 \
    "svc:echo@$gw2_shm0@$gw_tcp0"
stats=$("$CWCTL" --admin "$gw_admin" stats --json)
[ "$(json_num "$stats" denied)" = 11 ] || fail "denied count: $stats"
pass "gateway counted 11 denials"
# (cw-ping's argument is its data plus a 4-byte length.)
ping_expect "request of 1 MiB (max_payload_size)" CW_OK -c 2 -s 1048572 \
    "svc:echo@$gw_tcp0"
ping_expect "request of 1 MiB + 1 refused" CW_OVERFLOW -c 2 -s 1048573 \
    "svc:echo@$gw_tcp0"
ping_expect "after the refusals, the same client is served" CW_OK -c 2 -s 64K \
    "svc:echo@$gw_tcp0"
ping_expect "request with a bulk descriptor (rewritten to a proxy handle)" CW_OK -c 2 \
    --with-bulk "svc:echo@$gw_tcp0"

# The admin interface also speaks HTTP/1.0 (curl, monitoring agents).
host=${gw_admin%:*}
port=${gw_admin##*:}
exec 5<>"/dev/tcp/$host/$port" || fail "cannot connect to the admin port"
printf 'GET /stats?json HTTP/1.0\r\nHost: x\r\n\r\n' >&5
reply=$(timeout 5 cat <&5)
exec 5<&-
printf '%s' "$reply" | head -n 1 | grep -q "^HTTP/1.0 200 OK" || fail "HTTP reply: $reply"
printf '%s' "$reply" | grep -q '"denied":11,' || fail "HTTP stats body: $reply"
pass "admin over HTTP/1.0: GET /stats?json"
