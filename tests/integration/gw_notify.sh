#!/bin/bash
# Type=notify without libsystemd: causewayd sends the sd_notify(3)
# datagrams to $NOTIFY_SOCKET (a Python listener stands in for systemd):
# READY=1 once it listens, RELOADING=1 (with MONOTONIC_USEC) then READY=1
# around a reload (a refused one too), STOPPING=1 when SIGTERM drains it;
# an abstract "@name" socket works as a path does; a NOTIFY_SOCKET that
# names no socket is reported in the log and the gateway serves anyway.
. "$(dirname "$0")/gw_lib.sh"

# listen NAME ADDR: a notification socket at ADDR; its datagrams, one a
# line, in $T/NAME.notify.
listen() {
    timeout 60 python3 "$(dirname "$0")/notify_listen.py" "$2" "$T/$1.notify" 60 \
        2>"$T/$1-listener.log" &
    PIDS="$PIDS $!"
    wait_for test -e "$T/$1.notify" || fail "notification listener $1 did not bind $2"
}
# line NAME N: datagram N (from 1) received by listener NAME.
line() { sed -n "$2p" "$T/$1.notify"; }
lines() { wc -l <"$T/$1.notify"; }

start_echo echo "shm://$TAG-echo"
listen sd "$T/notify.sock"
export NOTIFY_SOCKET="$T/notify.sock"
tcp_shm_gw gw "admin: \"127.0.0.1:$(free_port)\""
unset NOTIFY_SOCKET
wait_for grep -q "^READY=1" "$T/sd.notify" || fail "no READY=1: $(cat "$T/sd.notify")"
case $(line sd 1) in
"READY=1 STATUS=serving: 2 networks, "*) pass "READY=1 first, with its status: $(line sd 1)" ;;
*) fail "first datagram is not READY=1 with a status: $(line sd 1)" ;;
esac
# It came once the networks listened: both addresses were on the ready fd.
[ -n "${gw_tcp0:-}" ] && [ -n "${gw_shm0:-}" ] || fail "gateway ready without its addresses"

# reload_notes WHAT STATUS_RE: SIGHUP; RELOADING=1 with MONOTONIC_USEC, then
# READY=1 whose status matches STATUS_RE, both after the signal.
reload_notes() {
    local n
    n=$(lines sd)
    kill -HUP "$gw_PID"
    wait_for sh -c "[ \$(wc -l <'$T/sd.notify') -ge $((n + 2)) ]" ||
        fail "$1: not two datagrams after SIGHUP: $(sed -n "$((n + 1)),\$p" "$T/sd.notify")"
    line sd $((n + 1)) | grep -qE "^RELOADING=1 MONOTONIC_USEC=[0-9]+ STATUS=reloading $T/gw.yaml\$" ||
        fail "$1: datagram after SIGHUP is not RELOADING=1 with MONOTONIC_USEC: $(line sd $((n + 1)))"
    line sd $((n + 2)) | grep -qE "^READY=1 STATUS=$2" ||
        fail "$1: no READY=1 ($2) after RELOADING=1: $(line sd $((n + 2)))"
    pass "$1: RELOADING=1 then $(line sd $((n + 2)))"
}
reload_notes "valid reload" "serving: reloaded, [0-9]+ routes\$"
usec=$(line sd 2 | sed -n 's/.*MONOTONIC_USEC=\([0-9]*\).*/\1/p')
now=$(python3 -c 'import time; print(time.clock_gettime_ns(time.CLOCK_MONOTONIC) // 1000)')
[ "$usec" -gt 0 ] && [ "$usec" -le "$now" ] || fail "MONOTONIC_USEC=$usec is not CLOCK_MONOTONIC (now $now us)"
pass "MONOTONIC_USEC=$usec is CLOCK_MONOTONIC in microseconds (now $now)"

cp "$T/gw.yaml" "$T/gw.yaml.good"
printf 'gateway: { name: gw\nnetworks: [\n' >"$T/gw.yaml"
reload_notes "refused reload" "serving: reload failed, kept the current table: "
cp "$T/gw.yaml.good" "$T/gw.yaml"
ping_expect "serving after the refused reload" CW_OK -c 4 "$echo@$gw_tcp0"
n=$(lines sd)
stop_pid "$gw_PID"
wait_for sh -c "sed -n '$((n + 1)),\$p' '$T/sd.notify' | grep -q '^STOPPING=1 STATUS=draining [0-9]* RPCs in flight'" ||
    fail "no STOPPING=1 after SIGTERM: $(sed -n "$((n + 1)),\$p" "$T/sd.notify")"
pass "SIGTERM: $(sed -n "$((n + 1)),\$p" "$T/sd.notify" | grep STOPPING)"

# An abstract socket, "@name".
listen abs "@cw-notify-$TAG"
export NOTIFY_SOCKET="@cw-notify-$TAG"
tcp_shm_gw agw "admin: \"127.0.0.1:$(free_port)\""
unset NOTIFY_SOCKET
wait_for grep -q "^READY=1 STATUS=serving" "$T/abs.notify" ||
    fail "no READY=1 on the abstract socket @cw-notify-$TAG"
pass "abstract @cw-notify-$TAG: $(line abs 1)"
stop_pid "$agw_PID"

# A NOTIFY_SOCKET that names no socket: said in the log; the gateway runs.
export NOTIFY_SOCKET="relative-name"
tcp_shm_gw bgw "admin: \"127.0.0.1:$(free_port)\""
unset NOTIFY_SOCKET
grep -q "NOTIFY_SOCKET 'relative-name': not a socket path or @abstract name" "$T/bgw.log" ||
    fail "a bad NOTIFY_SOCKET is not reported: $(tail -n 5 "$T/bgw.log")"
pass "a bad NOTIFY_SOCKET is reported and the gateway serves"
stop_pid "$bgw_PID"
