# Shared helpers of the gateway integration tests (sourced, bash).
#   gw_*.sh CAUSEWAYD CW_PING CWCTL
# Every process started here is killed and reaped on exit; the temporary
# directory and the shm segments named after this test are removed.  Every
# gateway started by start_gw is checked when it is reaped (stop_pid,
# gw_kill, or on exit): it must have exited 0 on SIGTERM and left no
# sanitizer report, else the test fails (tests/README.md).
set -u

CAUSEWAYD=$1
CW_PING=$2
CWCTL=$3
# The tools directory (CW_PING may become a memcheck wrapper below).
CW_TOOLS=$(dirname "$CW_PING")
CW_INFO=$CW_TOOLS/cw-info
unset CAUSEWAY_ROUTES CAUSEWAY_GATEWAY CAUSEWAY_ADMIN
T=$(mktemp -d /tmp/cw-gwtest.XXXXXX)
TAG=gwt$$
PIDS=""
CLEANUP_HOOKS=""
GW_NAMESPACES=""
# Gateways started and not yet reaped, as PID=NAME (their log: $T/NAME.log).
GW_DAEMONS=""
# Sub-cases that could not run here (skip_case): the test exits 77.
GW_SKIPPED=""
# What sanitizers write: ASan, LSan, UBSan, TSan (whose reports go to
# files of their own when TSAN_OPTIONS has a log_path: PATH.PID).
SANITIZER_RE='ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error|UndefinedBehaviorSanitizer|WARNING: ThreadSanitizer'
GW_TSAN_LOG=$(printf '%s' "${TSAN_OPTIONS:-}" | tr ' :' '\n\n' | sed -n 's/^log_path=//p')
# Memcheck (README.md, "Memcheck"): CW_VALGRIND, a valgrind command line
# with --error-exitcode, runs the gateways and cw-ping (callers and echo
# servers) under it, each process's report in $T/vg.PID.log, checked on
# exit (gw_vg_check); waits are CW_WAIT_SCALE (default 1) times longer.
# gw_vg_wrap VAR NAME: with CW_VALGRIND set, the program whose path VAR
# holds runs under it too, through a wrapper $T/vg/NAME (the scripts' own
# peers: soak, killpeer, flood, test_gwbulk_xfer).  Without it, nothing.
gw_vg_wrap() {
    local var=$1 name=$2
    [ -n "${CW_VALGRIND:-}" ] || return 0
    mkdir -p "$T/vg"
    printf '#!/bin/sh\nexec %s --log-file=%s/vg.%%p.log "%s" "$@"\n' \
        "$CW_VALGRIND" "$T" "$(realpath "${!var}")" >"$T/vg/$name"
    chmod +x "$T/vg/$name"
    printf -v "$var" '%s' "$T/vg/$name"
}
gw_vg_wrap CAUSEWAYD causewayd
gw_vg_wrap CW_PING cw-ping
# gw_vg_check: every memcheck report of this test's processes says "0
# errors"; else print the reports and fail.
gw_vg_check() {
    local f bad=0
    for f in "$T"/vg.*.log; do
        [ -f "$f" ] || continue
        grep -q "ERROR SUMMARY: 0 errors" "$f" && continue
        # A process killed on purpose (-9) writes no summary.
        grep -q "ERROR SUMMARY:" "$f" || continue
        echo "--- memcheck: $f"
        grep -v "^==[0-9]*== *$" "$f" | head -n 80
        bad=1
    done
    return $bad
}

# gw_reaped PID STATUS [WHY]: PID was reaped with STATUS ("killed": by the
# test, on purpose).  If it is a gateway of start_gw's, forget it and check
# it: exit status 0 (unless killed on purpose) and no sanitizer report in
# its log.  False, with the reasons printed, if the check fails.
gw_reaped() {
    local pid=$1 rc=$2 why=${3:-} e name="" rest="" f n
    for e in $GW_DAEMONS; do
        if [ "${e%%=*}" = "$pid" ]; then name=${e#*=}; else rest="$rest $e"; fi
    done
    [ -n "$name" ] || return 0
    GW_DAEMONS=$rest
    if [ -z "$why" ] && [ "$rc" != killed ] && [ "$rc" != 0 ]; then
        if [ "$rc" -gt 128 ] 2>/dev/null; then
            why="ended by SIG$(kill -l "$rc" 2>/dev/null || echo "$((rc - 128))")"
        else
            why="exited with status $rc"
        fi
    fi
    for f in "$T/$name.log" ${GW_TSAN_LOG:+"$GW_TSAN_LOG.$pid"}; do
        [ -f "$f" ] || continue
        n=$(grep -n -m1 -E "$SANITIZER_RE" "$f" | cut -d: -f1)
        [ -n "$n" ] || continue
        why="${why:+$why; }sanitizer report in $f"
        echo "--- $f (from line $n)"
        sed -n "$((n > 5 ? n - 5 : 1)),$((n + 40))p" "$f"
    done
    if [ -z "$why" ]; then
        [ "$rc" = killed ] || echo "ok - gateway $name (pid $pid) exited 0, no sanitizer report"
        return 0
    fi
    echo "FAIL: gateway $name (pid $pid): $why"
    [ -f "$T/$name.log" ] && { echo "--- $name.log (last lines)"; tail -n 15 "$T/$name.log"; }
    return 1
}

gw_cleanup() {
    local rc=$? p e st why n bound=200
    for h in $CLEANUP_HOOKS; do $h; done
    for p in $PIDS; do kill -TERM "$p" 2>/dev/null; done
    # Gateways drain on SIGTERM and exit 0; one that does not, or that left
    # a sanitizer report, fails the test (a test already failing waits less).
    [ "$rc" = 0 ] || [ "$rc" = 77 ] || bound=30
    bound=$((bound * ${CW_WAIT_SCALE:-1}))
    for e in $GW_DAEMONS; do
        p=${e%%=*}
        why=""
        for ((n = 0; n < bound; n++)); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1 # sleep-ok: the poll interval of a bounded wait
        done
        kill -KILL "$p" 2>/dev/null && why="still running $((bound / 10)) s after SIGTERM"
        wait "$p" 2>/dev/null
        st=$?
        gw_reaped "$p" "$st" "$why" || rc=1
    done
    for p in $PIDS; do
        for ((n = 0; n < 10 * ${CW_WAIT_SCALE:-1}; n++)); do
            kill -0 "$p" 2>/dev/null || break
            sleep 0.1 # sleep-ok: the poll interval of a bounded wait
        done
        kill -KILL "$p" 2>/dev/null
        wait "$p" 2>/dev/null
    done
    for n in $GW_NAMESPACES; do ip netns del "$n" 2>/dev/null; done
    [ -z "${CW_VALGRIND:-}" ] || gw_vg_check || rc=1
    rm -rf "$T"
    rm -f /dev/shm/causeway-"$TAG"* 2>/dev/null
    if [ "$rc" = 0 ] && [ -n "$GW_SKIPPED" ]; then
        printf 'SKIP: %b' "$GW_SKIPPED"
        rc=77
    fi
    # Said explicitly: the status of the script is this one.
    exit "$rc"
}
trap gw_cleanup EXIT
trap 'exit 1' INT TERM

fail() {
    local n
    echo "FAIL: $*"
    for f in "$T"/*.log; do
        [ -s "$f" ] || continue
        # A crash: from its first line, not only the end of the report.
        n=$(grep -n -m1 -E "Assertion|terminated with signal|ERROR: AddressSanitizer|runtime error" "$f" | cut -d: -f1)
        if [ -n "$n" ]; then
            echo "--- $(basename "$f") (from line $n)"
            sed -n "$((n > 5 ? n - 5 : 1)),$((n + 40))p" "$f"
        fi
        echo "--- $(basename "$f") (last lines)"
        tail -n 15 "$f"
    done
    exit 1
}

pass() { echo "ok - $*"; }

# wait_for CMD...: retry for up to 10 s.
wait_for() {
    wait_for_s 10 "$@"
}

# wait_for_s SECONDS CMD...: retry for up to SECONDS.
wait_for_s() {
    local n=$(($1 * 20 * ${CW_WAIT_SCALE:-1}))
    shift
    for ((; n > 0; n--)); do
        "$@" && return 0
        sleep 0.05 # sleep-ok: the poll interval of a bounded wait
    done
    return 1
}

# A free port outside the ephemeral range, never one handed out before to
# this test or (under meson test) to another one beside it (free_port.py).
free_port() {
    CW_PORT_REGISTRY=${CW_PORT_REGISTRY:-${T:+$T/ports.taken}} \
        python3 "$(dirname "${BASH_SOURCE[0]}")/free_port.py"
}

# addr_ready FILE PID: a server has written its address to FILE; one that
# exited before fails the test at once.
addr_ready() {
    test -s "$1" && return 0
    kill -0 "$2" 2>/dev/null || fail "server pid $2 exited before writing $1"
    return 1
}

# start_echo NAME URI [DELAY_MS] [PREFIX...]: echo server; sets $NAME (its
# address) and ${NAME}_PID.  PREFIX runs it (e.g. "ip netns exec ns").
start_echo() {
    local name=$1 uri=$2 delay=${3:-0}
    shift 3 2>/dev/null || shift $#
    rm -f "$T/$name.addr"
    "$@" "$CW_PING" --serve "$uri" --addr-file "$T/$name.addr" \
        --delay "$delay" 2>"$T/$name.log" &
    eval "${name}_PID=$!"
    PIDS="$PIDS $!"
    wait_for addr_ready "$T/$name.addr" "$!" || fail "echo server $name ($uri) did not start"
    eval "$name=\$(cat \"\$T/\$name.addr\")"
}

# fabric_here URI: true if cw-info can open URI here; false, with the
# reason in $FABRIC_WHY, only when its plugin is not installed ("no such
# entry") or the protocol does not exist here ("operation not supported").
# Any other failure to open it fails the test: a fabric that exists here
# must work.
fabric_here() {
    local out line
    out=$("$CW_INFO" "$1" 2>&1)
    line=$(printf '%s\n' "$out" | grep -F -m1 "  $1 ")
    case $line in
    *" ok: "*) return 0 ;;
    *" unavailable: no such entry" | *" unavailable: operation not supported")
        FABRIC_WHY="cw-info: ${line##*unavailable: }"
        return 1 ;;
    esac
    fail "cw-info cannot open $1, which is not absent here: ${line:-$out}"
}

# skip_case WHAT WHY: a sub-case that cannot run here because what it needs
# is absent (WHY says what).  The rest of the test runs; it then exits 77
# (meson: SKIP) instead of 0, so a pass never hides a case left out.
skip_case() {
    echo "# SKIP $1: $2"
    GW_SKIPPED="${GW_SKIPPED}$1: $2\n"
}

# gw_cfg_threads CONFIG: with CW_GW_THREADS=N set (the threaded runs of
# these tests), give the gateway section threads: N unless it sets threads
# itself.  Scripts that rewrite a config for a reload call it again.
gw_cfg_threads() {
    [ -n "${CW_GW_THREADS:-}" ] || return 0
    grep -q "threads:" "$1" && return 0
    sed -i "s/^gateway: *{/gateway: { threads: $CW_GW_THREADS,/" "$1"
}

# gw_restarting NAME: before gateway NAME starts again (its log is
# rewritten), check the previous one, which must have ended (killed by
# gw_kill, stopped by stop_pid, or exited by itself).
gw_restarting() {
    local e p
    for e in $GW_DAEMONS; do
        [ "${e#*=}" = "$1" ] || continue
        p=${e%%=*}
        kill -0 "$p" 2>/dev/null && fail "gateway $1 started again while pid $p still runs"
        wait "$p" 2>/dev/null
        gw_reaped "$p" $? || fail "gateway $1 ended before its restart"
    done
}

# gw_is_ready NAME PID: gateway NAME has said "ready"; one that exited
# before fails the test at once.
gw_is_ready() {
    grep -qs "^ready$" "$T/$1.ready" && return 0
    kill -0 "$2" 2>/dev/null || fail "gateway $1 exited before it was ready"
    return 1
}

# start_gw NAME CONFIG [PREFIX...]: gateway; sets ${NAME}_PID and, from its
# ready lines, ${NAME}_<network> addresses and ${NAME}_admin.
start_gw() {
    local name=$1 cfg=$2 k v
    shift 2
    gw_cfg_threads "$cfg"
    rm -f "$T/$name.ready"
    gw_restarting "$name"
    "$@" "$CAUSEWAYD" -c "$cfg" --log-level info --ready-fd 3 \
        3>"$T/$name.ready" 2>"$T/$name.log" &
    eval "${name}_PID=$!"
    PIDS="$PIDS $!"
    GW_DAEMONS="$GW_DAEMONS $!=$name"
    wait_for gw_is_ready "$name" "$!" || fail "gateway $name did not start"
    while read -r k v; do
        [ "$k" = ready ] && continue
        eval "${name}_${k}=\$v"
    done <"$T/$name.ready"
}

# tcp_shm_gw NAME "GATEWAY KEYS" [PREFIX...]: start gateway NAME (start_gw,
# optionally under PREFIX, e.g. ip netns exec NS) on ofi+tcp (tcp0) and
# shm (shm0) only: "gateway: { name: NAME, GATEWAY KEYS }".
tcp_shm_gw() {
    local name=$1 keys=$2
    shift 2
    cat >"$T/$name.yaml" <<YAML
gateway: { name: $name, $keys }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-$name" }
YAML
    start_gw "$name" "$T/$name.yaml" "$@"
}

# stop_pid PID: SIGTERM, wait (10 s at most); the exit status goes to
# $STOP_RC (not a subshell: only this shell can reap its children).  A
# gateway must have exited 0 with no sanitizer report (gw_reaped).
stop_pid() {
    local p=$1 why=""
    kill -TERM "$p" 2>/dev/null
    for _ in $(seq $((100 * ${CW_WAIT_SCALE:-1}))); do
        kill -0 "$p" 2>/dev/null || break
        sleep 0.1 # sleep-ok: the poll interval of a bounded wait
    done
    kill -KILL "$p" 2>/dev/null && why="still running $((10 * ${CW_WAIT_SCALE:-1})) s after SIGTERM"
    wait "$p"
    STOP_RC=$?
    gw_reaped "$p" "$STOP_RC" "$why" || fail "a gateway did not stop cleanly"
}

# gw_kill PID: kill -9 on purpose (the failure under test) and reap it; a
# gateway so killed (or one stopped by SIGSTOP and never continued) is
# not counted against the test, but its log is still checked.
gw_kill() {
    kill -KILL "$1" 2>/dev/null
    wait "$1" 2>/dev/null
    gw_reaped "$1" killed || fail "a gateway killed on purpose had failed before"
}

# gw_stop_clean NAME...: stop gateways with SIGTERM; each must exit 0 with
# no sanitizer report (leaks included) in its log (stop_pid checks).
gw_stop_clean() {
    local g p
    for g in "$@"; do
        eval "p=\${${g}_PID}"
        stop_pid "$p"
    done
    pass "gateways $* stopped cleanly"
}

# ns_make NAME: a network namespace, deleted on exit, its loopback up;
# false where namespaces cannot be created here, with the reason in
# $NS_WHY (not root, no iproute2, or what `ip netns add` said).
ns_make() {
    if [ "$(id -u)" != 0 ]; then
        NS_WHY="not root (uid $(id -u)): cannot create network namespaces"
        return 1
    fi
    if ! command -v ip >/dev/null; then
        NS_WHY="no ip command (iproute2): cannot create network namespaces"
        return 1
    fi
    if ! NS_WHY=$(ip netns add "$1" 2>&1); then
        NS_WHY="ip netns add $1: ${NS_WHY:-failed}"
        return 1
    fi
    GW_NAMESPACES="$GW_NAMESPACES $1"
    ip netns exec "$1" ip link set lo up || fail "lo up in $1"
}

# metrics_expect ADMIN [SAMPLE=VALUE...]: `cwctl metrics` is a valid
# Prometheus exposition (metrics_check.py) holding those samples.
metrics_expect() {
    local admin=$1
    shift
    "$CWCTL" --admin "$admin" metrics >"$T/metrics.txt" ||
        fail "cwctl metrics failed"
    python3 "$(dirname "${BASH_SOURCE[0]}")/metrics_check.py" "$@" \
        <"$T/metrics.txt" >"$T/metrics.check" ||
        fail "metrics: $(cat "$T/metrics.check")"
}

# http_get HOST:PORT PATH: the raw HTTP/1.0 answer of the admin interface.
http_get() {
    local fd
    exec {fd}<>"/dev/tcp/${1%:*}/${1##*:}" || return 1
    printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$2" "$1" >&"$fd"
    timeout 5 cat <&"$fd"
    exec {fd}>&-
}

# ping_expect WHAT STATUS ARGS...: run cw-ping, require every call to end
# with STATUS (e.g. CW_OK).
ping_expect() {
    local what=$1 st=$2
    shift 2
    timeout 60 "$CW_PING" -q --expect "$st" "$@" >"$T/ping.out" 2>"$T/ping.err" ||
        fail "$what: expected $st: $(cat "$T/ping.out") $(tail -n 3 "$T/ping.err")"
    pass "$what: $(tail -n 1 "$T/ping.out")"
}

# wait_count PIDS...: wait for each of this shell's children PIDS; sets
# WAIT_OK to how many exited 0 (not in $(...): a subshell cannot wait for
# its parent's children).
wait_count() {
    local p
    WAIT_OK=0
    for p in "$@"; do
        wait "$p" && WAIT_OK=$((WAIT_OK + 1))
    done
}

# json_num JSON KEY: first number for "KEY": in a JSON text (empty if
# none).  In bash itself: tests poll counters with it, and three
# processes a call made each poll slow on a loaded machine.
json_num() {
    local re="\"$2\":([0-9]*)"
    [[ $1 =~ $re ]] && printf '%s\n' "${BASH_REMATCH[1]}"
    return 0
}

# stat_of ADMIN KEY: a number from `cwctl stats --json` (first match).
stat_of() {
    json_num "$("$CWCTL" --admin "$1" stats --json 2>/dev/null)" "$2"
}
