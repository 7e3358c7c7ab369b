#!/bin/bash
# Kill matrix (issue 31; docs/reliability.md, "Kill matrix"): kill -9 of
# the target, the gateway and the caller, and SIGSTOP of the target, each
# in each phase of an RPC through the gateway, and a route with two
# gateways, one killed.  Prints the matrix with measured times.
#   kills.sh CAUSEWAYD CW_PING CWCTL KILLPEER
# Path: caller -[CLI_FABRIC]-> causewayd -[TGT_FABRIC]-> target (killpeer
# serve); CLI_FABRIC ofi+tcp (the default), ucx+tcp, shm or verbs,
# TGT_FABRIC ucx+tcp (the default), shm, ofi+tcp or verbs (na-verbs on its
# fake device, the module of KILLPEER's build tree); another target on the same fabric
# (a cw-ping echo server) is the other route, reached the same way.
# Phases, each reached as observed state, not after a delay:
#   before      the caller is connected (a kp.ping through the path ended
#               CW_OK) and has sent nothing; the victim goes first, then
#               the caller sends NHOLD kp.hold RPCs;
#   forwarding  NHOLD kp.hold RPCs held by the target (its "held" lines)
#               and in flight at the gateway (stats: inflight);
#   pull, push  a BULK_LEN transfer of the target's through the gateway's
#               staging pipeline, mid-way (stats: bulk active, 64 chunk
#               uses since it began: mid_pull of gw_bulk_lib.sh);
#   response    a BIG_LEN answer (past the eager limit: pulled by the
#               receiving side).  Target victims: the target has sent it
#               and it is not collected (its "responding" line; the
#               gateway counted the answer's arrival and still has the RPC
#               in flight), the target then makes no progress.  Gateway and
#               caller victims: the caller has the answer's header and not
#               its payload ("mid-response"; it then makes no progress
#               until the kill is done).
#   request     a kp.args RPC whose BIG_LEN arguments are past the eager
#               limit: the gateway pulls them from the caller before it
#               forwards.  The caller has sent it and then makes no
#               progress until the kill is done ("mid-request"), so over
#               ofi+tcp or ucx+tcp the pull stalls; the gateway has the
#               request unanswered (/metrics) and nothing in flight.  Not
#               over shm: na-shm reads the caller's memory without its
#               progress, and the gateway has the arguments whole first.
# A cell passes when: every RPC of the caller completed exactly once with
# an error status, at most DEADLINE_MS + 1 s after it was sent (target and
# gateway victims, SIGSTOP); a bulk transfer whose origin is the target
# ended once, with an error (caller and gateway victims); the other route
# answered 20 calls CW_OK right after the kill (not when the gateway is
# the victim); and the gateway came back to idle: nothing in flight or
# queued, no bulk pipeline, all staging free, no live token, no request
# unanswered or answer uncollected (/metrics), and no more open fds than
# before the cell.  A SIGSTOPped target stays stopped until the gateway is
# idle.  Failover: front -[ofi+tcp]-> gwa | gwb -[ucx+tcp]-> target, with
# health checks every 200 ms; gwa is killed under a stream of calls; every
# call started 2 s after the kill or later must end CW_OK.
# CHAIN=1 puts a second gateway, the front, between the caller and the
# matrix's gateway, which the caller reaches through it by an explicit chain
# (target@gateway@front): caller -[CLI_FABRIC]-> front -[HOP_FABRIC]->
# causewayd -[TGT_FABRIC]-> target.  The victims add "front" (kill -9 of
# the front); "gateway" is then the far one, which the caller does not
# talk to.  Every gateway left alive must come back to idle; the request
# phase is reached at the front (it pulls the caller's arguments).
# CHAIN=2 puts a third, the middle gateway, between the front and the far
# one (target@gateway@mid@front; caller -[CLI_FABRIC]-> front
# -[HOP_FABRIC]-> mid -[HOP_FABRIC]-> causewayd -[TGT_FABRIC]-> target);
# the victims add "mid".  CHAIN=N (3 to 6) puts N - 1 middle gateways
# there, mid1 next to the front to midN-1 next to the far one
# (target@gateway@midN-1@...@mid1@front), all on HOP_FABRIC; the victims
# add each of them.
# Environment: DEADLINE_MS (5000), HOLD_MS (DEADLINE_MS / 2: a held
# request's answer), NHOLD (4), BULK_LEN (256M), BIG_LEN (32M), VICTIMS
# ("target gateway client stop"), PHASES ("before forwarding pull push
# response request"), CELLS ("VICTIM/PHASE ...": only these cells, e.g.
# "target/pull stop/before"), FAILOVER (1), FAILOVER_S (4: seconds of
# calls after the kill), GW_THREADS (1), CLI_FABRIC (ofi+tcp), TGT_FABRIC
# (ucx+tcp), CHAIN (0), HOP_FABRIC (ofi+tcp).
GW_THREADS=${GW_THREADS:-1} # soak_lib.sh's default is 2
. "$(dirname "$0")/soak_lib.sh"                   # gw_lib.sh, num_of, soak_fabrics
. "$(dirname "$0")/../integration/gw_bulk_lib.sh" # mid_pull
KP=$4
DEADLINE_MS=${DEADLINE_MS:-5000}
HOLD_MS=${HOLD_MS:-$((DEADLINE_MS / 2))}
NHOLD=${NHOLD:-4}
BULK_LEN=${BULK_LEN:-256M}
BIG_LEN=${BIG_LEN:-32M}
CHAIN=${CHAIN:-0}
# MIDS: the middle gateways, from the far one's side to the front's.
case $CHAIN in
0 | 1) MIDS="" ;;
2) MIDS=mid ;;
[3-6]) MIDS=$(for ((i = CHAIN - 1; i >= 1; i--)); do printf 'mid%s ' "$i"; done) ;;
*) fail "CHAIN: 0 to 6, not '$CHAIN'" ;;
esac
MIDS=${MIDS% }
case $CHAIN in
0) VICTIMS=${VICTIMS:-target gateway client stop} ;;
*) VICTIMS=${VICTIMS:-target gateway ${MIDS:+$MIDS }front client stop} ;;
esac
PHASES=${PHASES:-before forwarding pull push response request}
FAILOVER=${FAILOVER:-1}
TGT_FABRIC=${TGT_FABRIC:-ucx+tcp}
case $TGT_FABRIC in
ucx+tcp) ;;
ofi+tcp | shm) FAILOVER=0 ;; # the failover's gateways reach it over ucx+tcp
verbs) FAILOVER=0 ;;
*) fail "TGT_FABRIC: ucx+tcp, ofi+tcp, shm or verbs, not '$TGT_FABRIC'" ;;
esac
# tgt_uri NAME: where a target of the kill matrix listens.
tgt_uri() {
    case $TGT_FABRIC in
    shm) echo "shm://$TAG-$1" ;;
    verbs) echo "verbs://fake0:1/127.0.0.1:0" ;;
    *) echo "$TGT_FABRIC://127.0.0.1:0" ;;
    esac
}
CLI_FABRIC=${CLI_FABRIC:-ofi+tcp}
# The gateway's network the caller reaches it on (gw_up's names).
# net_of FABRIC: the name of a gateway's network on FABRIC (gw_up's).
net_of() {
    case $1 in
    ofi+tcp) echo tcp0 ;;
    ucx+tcp) echo ucx0 ;;
    shm) echo shm0 ;;
    verbs) echo vb0 ;;
    *) return 1 ;;
    esac
}
CLI_NET=$(net_of "$CLI_FABRIC") ||
    fail "CLI_FABRIC: ofi+tcp, ucx+tcp, shm or verbs, not '$CLI_FABRIC'"
HOP_FABRIC=${HOP_FABRIC:-ofi+tcp}
HOP_NET=$(net_of "$HOP_FABRIC") ||
    fail "HOP_FABRIC: ofi+tcp, ucx+tcp, shm or verbs, not '$HOP_FABRIC'"
case $CHAIN in
0) GWS=gw ;;
*) GWS="gw ${MIDS:+$MIDS }front" ;;
esac
# is_gw NAME: NAME is one of the gateways (a victim that forwards).
is_gw() { case " $GWS " in *" $1 "*) return 0 ;; esac; return 1; }
[ "$CHAIN" = 0 ] || FAILOVER=0 # its own gateways, without the chain
VERBS_USED=""
for f in "$CLI_FABRIC" "$TGT_FABRIC" "$([ "$CHAIN" = 0 ] || echo "$HOP_FABRIC")"; do
    [ "$f" != verbs ] || VERBS_USED=1
done
if [ -n "$VERBS_USED" ]; then
    # na-verbs on its fake device (docs/na-verbs.md, "The fake device"):
    # the module of KILLPEER's build tree, used by every process here.
    VB_FAKE=$(cd "$(dirname "$KP")/../../na-verbs" 2>/dev/null && pwd)/cw-verbs-fake.so
    [ -f "$VB_FAKE" ] || fail "verbs: no fake device module at $VB_FAKE"
    export CAUSEWAY_VERBS_FAKE=$VB_FAKE
fi
gw_vg_wrap KP killpeer # under memcheck too with CW_VALGRIND
# gw_in: what follows "target@" in the caller's address: the gateway's
# address on CLI_FABRIC, or in a chain the gateway's on HOP_FABRIC, "@" each
# middle one's on HOP_FABRIC, "@" the front's on CLI_FABRIC (they change
# when a gateway is started again).
gw_in() {
    local m v
    if [ "$CHAIN" = 0 ]; then
        v=gw_$CLI_NET
        printf '%s' "${!v}"
        return
    fi
    v=gw_$HOP_NET
    printf '%s' "${!v}"
    for m in $MIDS; do
        v=${m}_$HOP_NET
        printf '@%s' "${!v}"
    done
    v=front_$CLI_NET
    printf '@%s' "${!v}"
}
FAILOVER_S=${FAILOVER_S:-4}
# How long the gateway (and the caller) may take to come back to idle.
IDLE_S=${IDLE_S:-$((DEADLINE_MS / 1000 + 20))}
# UCX warns about every message that lost its receiver: errors only.
export UCX_LOG_LEVEL=error

soak_fabrics

line_in() { grep -qE "$2" "$1" 2>/dev/null; }
count_in() { grep -cE "$2" "$1" 2>/dev/null || true; }
# at_least FILE REGEX N: at least N lines of FILE match.
at_least() { [ "$(count_in "$1" "$2")" -ge "$3" ]; }
gone() { ! kill -0 "$1" 2>/dev/null; }

# ---- the processes -----------------------------------------------------
GEN=0
# gw_up: the gateway, started again after a kill (new ports, a new shm
# name: the killed one's are not reused).
gw_up() {
    GEN=$((GEN + 1))
    cat >"$T/gw.yaml" <<YAML
gateway: { name: kgw, admin: "127.0.0.1:$(free_port)", threads: $GW_THREADS }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
  - { name: shm0, address: "shm://$TAG-gw$GEN" }
$([ -z "${CAUSEWAY_VERBS_FAKE:-}" ] || echo '  - { name: vb0, address: "verbs://fake0:1/127.0.0.1:0" }')
buffers: { chunk: 256KiB, depth: 4, staging: 2MiB }
limits: { max_bulk_bytes_inflight: 2MiB }
YAML
    start_gw gw "$T/gw.yaml"
}
FGEN=0
# chain_up NAME FABRIC...: a gateway of the chain on these fabrics, started
# again after a kill like the gateway.
chain_up() {
    local name=$1
    shift
    FGEN=$((FGEN + 1))
    {
        echo "gateway: { name: k$name, admin: \"127.0.0.1:$(free_port)\", threads: $GW_THREADS }"
        echo "networks:"
        for f in $(printf '%s\n' "$@" | sort -u); do
            case $f in
            shm) u="shm://$TAG-$name$FGEN" ;;
            verbs) u="verbs://fake0:1/127.0.0.1:0" ;;
            *) u="$f://127.0.0.1:0" ;;
            esac
            echo "  - { name: $(net_of "$f"), address: \"$u\" }"
        done
        echo "buffers: { chunk: 256KiB, depth: 4, staging: 2MiB }"
        echo "limits: { max_bulk_bytes_inflight: 2MiB }"
    } >"$T/$name.yaml"
    start_gw "$name" "$T/$name.yaml"
}
# front_up: the chain's front gateway (CHAIN >= 1), on CLI_FABRIC and
# HOP_FABRIC; mid_up NAME: a middle one (CHAIN >= 2), on HOP_FABRIC.
front_up() { chain_up front "$CLI_FABRIC" "$HOP_FABRIC"; }
mid_up() { chain_up "$1" "$HOP_FABRIC"; }
TGT_GEN=0
tgt_PID=""
# tgt_up: a killpeer target on TGT_FABRIC ($tgt, $tgt_PID; its lines in
# $T/tgt.out).
tgt_up() {
    TGT_GEN=$((TGT_GEN + 1))
    rm -f "$T/tgt.addr"
    "$KP" serve "$(tgt_uri "tgt$TGT_GEN")" "$T/tgt.addr" >"$T/tgt.out" 2>"$T/tgt$TGT_GEN.log" &
    tgt_PID=$!
    PIDS="$PIDS $!"
    wait_for addr_ready "$T/tgt.addr" "$tgt_PID" || fail "the target did not start"
    tgt=$(cat "$T/tgt.addr")
}
tgt_kill() {
    [ -n "$tgt_PID" ] || return 0
    kill -KILL "$tgt_PID" 2>/dev/null
    wait "$tgt_PID" 2>/dev/null
    tgt_PID=""
}
alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }

# Q: the gateway the functions below look at (gw, or the chain's front).
Q=gw
q_admin() { eval "printf '%s' \"\$${Q}_admin\""; }
q_pid() { eval "printf '%s' \"\$${Q}_PID\""; }
stats() { "$CWCTL" --admin "$(q_admin)" stats --json 2>/dev/null; }
# metric NAME: a sample of the gateway's /metrics.
metric() {
    "$CWCTL" --admin "$(q_admin)" metrics 2>/dev/null | awk -v k="$1" '$1 == k { print $2 }'
}
gw_fds() { find "/proc/$(q_pid)/fd" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
# gw_fd_list: what the gateway's fds are (sockets by inode), one a line.
gw_fd_list() { find "/proc/$(q_pid)/fd" -mindepth 1 -maxdepth 1 -printf '%f %l\n' 2>/dev/null | sort -n; }
# new_fds: the gateway's fds now that were not there at the cell's start.
new_fds() {
    gw_fd_list >"$T/fds.now"
    comm -13 <(cut -d' ' -f2 "$T/fds.0.$Q" | sort) <(cut -d' ' -f2 "$T/fds.now" | sort)
}
# fds_ok: no fd more than at the cell's start, but for TCP connections to
# a live process (with several workers, a target that delegates a transfer
# connects to the worker's own endpoint: a connection that stays).  An fd
# of a dead peer's connection (CLOSE-WAIT, or its peer gone), or any other
# new fd, is not idle.
fds_ok() {
    local f ino line peer pid ust upeer
    local - # "*" in ss's output is no pattern
    set -f
    FD_WHY=""
    ss -tanpe >"$T/ss.now" 2>/dev/null
    ss -xape >"$T/ssx.now" 2>/dev/null
    for f in $(new_fds); do
        ino=$(printf '%s' "$f" | sed -n 's/^socket:\[\([0-9]*\)\]$/\1/p')
        line=$(grep "ino:$ino " "$T/ss.now" 2>/dev/null | head -n 1)
        if [ -n "$ino" ] && [ -z "$line" ]; then
            # A Unix socket (na-shm keeps one per attached peer, to see it
            # go): "u_seq ESTAB 0 0 NAME INO PEER PEER_INO ...", fine if
            # the process on the other end lives.
            read -r ust upeer <<<"$(awk -v i="$ino" '$6 == i { print $2, $8; exit }' "$T/ssx.now")"
            if [ "${ust:-}" = ESTAB ]; then
                pid=$(awk -v i="$upeer" '$6 == i' "$T/ssx.now" | grep -o 'pid=[0-9]*' | head -n 1)
                if [ -n "$pid" ] && kill -0 "${pid#pid=}" 2>/dev/null; then
                    continue
                fi
                FD_WHY="$f unix ESTAB to inode $upeer, whose process is gone"
                return 1
            fi
            FD_WHY="$f ${ust:-not a TCP or Unix socket}"
            return 1
        fi
        set -- $line
        if [ -z "$ino" ] || [ -z "$line" ] || [ "$1" != ESTAB ]; then
            FD_WHY="$f ${1:-not a TCP socket}"
            return 1
        fi
        peer=$5
        pid=$(awk -v p="$peer" '$4 == p' "$T/ss.now" | grep -o 'pid=[0-9]*' | head -n 1)
        if [ -z "$pid" ] || ! kill -0 "${pid#pid=}" 2>/dev/null; then
            FD_WHY="$f ESTAB to $peer, whose process is gone"
            return 1
        fi
    done
}

# gw_quiet: nothing in flight or queued, no bulk pipeline, all staging
# free, no live proxy token, nothing unanswered or uncollected.
gw_quiet() {
    local s
    s=$(stats) || return 1
    [ "$(json_num "$s" inflight)" = 0 ] && [ "$(json_num "$s" queued)" = 0 ] &&
        [ "$(json_num "$s" active)" = 0 ] &&
        [ "$(json_num "$s" staging_free)" = "$(json_num "$s" staging_chunks)" ] &&
        [ "$(json_num "$s" tokens_live)" = 0 ] &&
        [ "$(metric causeway_gateway_unanswered_requests)" = 0 ] &&
        [ "$(metric causeway_gateway_uncollected_answers)" = 0 ]
}
# gw_idle: quiet, and no fd more than at the cell's start (fds_ok).
gw_idle() { gw_quiet && fds_ok; }
FDS_LAST=""
fds_steady() {
    local f
    f=$(gw_fds)
    [ "$f" = "$FDS_LAST" ] && return 0
    FDS_LAST=$f
    return 1
}
# gw_inflight_is N
gw_inflight_is() { [ "$(json_num "$(stats)" inflight)" = "$1" ]; }
# pulling: the gateway has a request whose arguments it is pulling (not
# answered, nothing forwarded).
pulling() {
    [ "$(metric causeway_gateway_unanswered_requests)" = 1 ] && gw_inflight_is 0
}
resp_arrived() {
    [ "$(metric causeway_gateway_responses_received_total)" -gt "$1" ] 2>/dev/null
}

# settle: target and gateways up, connected to the target (a kp.ping
# through them), quiet, their fd counts steady; FDS0_<gateway> is that
# count.
settle() {
    alive "$tgt_PID" || tgt_up
    alive "${gw_PID:-}" || gw_up
    for m in $MIDS; do
        p=${m}_PID
        alive "${!p:-}" || mid_up "$m"
    done
    [ "$CHAIN" = 0 ] || alive "${front_PID:-}" || front_up
    timeout 30 "$KP" call "$tgt@$(gw_in)" ping --n 1 >"$T/probe.out" 2>&1 ||
        fail "probe through the gateway: $(cat "$T/probe.out")"
    for Q in $GWS; do
        wait_for gw_quiet || fail "gateway $Q is not quiet before a cell: $(stats | head -c 400)"
        FDS_LAST=""
        wait_for fds_steady || wait_for fds_steady || fail "gateway $Q's fds do not settle"
        eval "FDS0_$Q=\$(gw_fds)"
        gw_fd_list >"$T/fds.0.$Q"
    done
    Q=gw
}

start_echo other "$(tgt_uri other)"
tgt_up
gw_up
for m in $MIDS; do mid_up "$m"; done
[ "$CHAIN" = 0 ] || front_up

# ---- one cell ------------------------------------------------------------
declare -A CELL DETAIL
FAILED=""
cell_fail() {
    CELL_BAD="${CELL_BAD:+$CELL_BAD; }$*"
}

# done_stats FILE T_KILL: "N OK DUP MAX_SINCE_SEND MAX_SINCE_KILL STATUSES"
done_stats() {
    awk -v k="$2" '
        /^done / { n++; if ($3 == "CW_OK") ok++; if ($4 > ms) ms = $4;
                   d = $5 - k; if (d > mk) mk = d; st[$3]++ }
        /^dup / { dup++ }
        END { s = ""; for (x in st) s = s (s == "" ? "" : ",") x "x" st[x];
              printf "%d %d %d %d %d %s\n", n, ok, dup, ms, mk, (s == "" ? "-" : s) }' "$1"
}

# cell VICTIM PHASE: run one cell; its summary goes to CELL[VICTIM.PHASE]
# and DETAIL[VICTIM.PHASE]; a failure is added to $FAILED.
cell() {
    local v=$1 ph=$2 op n args=() crc t_kill t_idle idle oroute held0 u0 r0
    local nd nok ndup ms mk sts be ans0 be0
    CELL_BAD=""
    settle
    rm -f "$T/go" "$T/go2"
    case $ph in
    before | forwarding) op=hold n=$NHOLD args=(--hold-ms "$HOLD_MS") ;;
    pull | push) op=$ph n=1 args=(--len "$(num_of "$BULK_LEN")") ;;
    response)
        op=big n=1 args=(--len "$(num_of "$BIG_LEN")")
        case $v in
        target | stop) args+=(--stall) ;;
        *) args+=(--pause-in-response "$T/go2") ;;
        esac
        ;;
    request)
        op=args n=1 args=(--len "$(num_of "$BIG_LEN")" --pause-in-request "$T/go2")
        ;;
    esac
    held0=$(count_in "$T/tgt.out" '^held ')
    ans0=$(count_in "$T/tgt.out" '^answered ')
    be0=$(count_in "$T/tgt.out" '^bulk-end ')
    # Not truncated by the redirection below before this shell looks.
    rm -f "$T/c.out"
    "$KP" call "$tgt@$(gw_in)" "$op" --n "$n" --timeout "$DEADLINE_MS" \
        --go "$T/go" "${args[@]}" >"$T/c.out" 2>"$T/c.log" &
    cli_PID=$!
    PIDS="$PIDS $!"
    wait_for_s 30 line_in "$T/c.out" '^ready$' ||
        fail "$v/$ph: the caller did not get ready: $(cat "$T/c.log")"
    # Reach the phase.
    case $ph in
    before) ;;
    forwarding)
        touch "$T/go"
        wait_for_s 20 at_least "$T/tgt.out" '^held ' $((held0 + n)) &&
            wait_for gw_inflight_is "$n" ||
            cell_fail "phase not reached: target held $(($(count_in "$T/tgt.out" '^held ') - held0)) of $n, gateway: $(stats | head -c 200)"
        ;;
    pull | push)
        u0=$(json_num "$(stats)" staging_uses)
        touch "$T/go"
        wait_for_s 20 line_in "$T/tgt.out" '^bulk-start ' && wait_for_s 20 mid_pull "$gw_admin" "$u0" ||
            cell_fail "phase not reached: no transfer mid-way at the gateway: $(stats | grep -o '"bulk":.*')"
        ;;
    response)
        r0=$(metric causeway_gateway_responses_received_total)
        touch "$T/go"
        case $v in
        target | stop)
            wait_for_s 20 line_in "$T/tgt.out" '^responding$' &&
                wait_for resp_arrived "$r0" && gw_inflight_is 1 ||
                cell_fail "phase not reached: target $(tail -n 1 "$T/tgt.out"), gateway answers $r0 -> $(metric causeway_gateway_responses_received_total), $(stats | head -c 100)"
            ;;
        *)
            wait_for_s 20 line_in "$T/c.out" '^mid-response ' ||
                cell_fail "phase not reached: the caller has no answer mid-way: $(tail -n 2 "$T/c.out")"
            ;;
        esac
        ;;
    request)
        touch "$T/go"
        # The gateway the caller talks to pulls the arguments.
        [ "$CHAIN" = 0 ] || Q=front
        wait_for_s 20 line_in "$T/c.out" '^mid-request ' && wait_for pulling ||
            cell_fail "phase not reached: caller $(tail -n 1 "$T/c.out"), gateway $Q unanswered $(metric causeway_gateway_unanswered_requests), $(stats | head -c 100)"
        Q=gw
        ;;
    esac
    # The failure.
    t_kill=$(now_ms)
    case $v in
    target) tgt_kill ;;
    gateway) gw_kill "$gw_PID" ;;
    front) gw_kill "$front_PID" ;;
    mid*)
        p=${v}_PID
        gw_kill "${!p}"
        ;;
    client)
        kill -KILL "$cli_PID"
        wait "$cli_PID" 2>/dev/null
        ;;
    stop) kill -STOP "$tgt_PID" ;;
    esac
    [ "$ph" = before ] && touch "$T/go"
    touch "$T/go2"
    # The other route, at once (the gateway must keep serving it).
    oroute="-"
    if ! is_gw "$v" && [ "$v" != gateway ]; then
        if timeout 30 "$CW_PING" -q --expect CW_OK -c 20 -n 4 -t "$DEADLINE_MS" \
            "$other@$(gw_in)" >"$T/other.out" 2>&1; then
            oroute="20/20 OK"
        else
            oroute="FAILED"
            cell_fail "other route: $(tail -n 2 "$T/other.out")"
        fi
    fi
    # The origin's view.
    if [ "$v" != client ]; then
        wait_s $IDLE_S gone "$cli_PID" ||
            cell_fail "the caller still runs $IDLE_S s after the kill"
        kill -KILL "$cli_PID" 2>/dev/null
        wait "$cli_PID"
        crc=$?
        read -r nd nok ndup ms mk sts <<<"$(done_stats "$T/c.out" "$t_kill")"
        [ "$crc" = 0 ] && [ "$nd" = "$n" ] && [ "$ndup" = 0 ] ||
            cell_fail "not exactly once: $n sent, $nd completed, $ndup twice (exit $crc): $(grep summary "$T/c.out")"
        [ "$nok" = 0 ] || cell_fail "$nok of $n ended CW_OK: the phase was over before the $v was hit"
        [ "$ms" -le $((DEADLINE_MS + 1000)) ] || cell_fail "an RPC took $ms ms (deadline $DEADLINE_MS ms + 1 s)"
        [ "$ph" = before ] && mk=$ms
        CELL[$v.$ph]="$sts; $ms ms"
        DETAIL[$v.$ph]="$nd/$n ended $sts, at most $ms ms after sending, $mk ms after the $v was hit"
    else
        CELL[$v.$ph]="origin gone"
        DETAIL[$v.$ph]="the caller killed"
    fi
    # Operations whose origin is the target: its bulk transfers, its
    # answers to held requests.
    if [ "$v" = client ] || [ "$v" = gateway ] || is_gw "$v"; then
        case $ph in
        pull | push)
            wait_s $IDLE_S at_least "$T/tgt.out" '^bulk-end ' $((be0 + 1)) ||
                cell_fail "the target's transfer did not end"
            be=$(grep '^bulk-end ' "$T/tgt.out" | tail -n 1)
            [ "$(count_in "$T/tgt.out" '^bulk-end ')" = $((be0 + 1)) ] ||
                cell_fail "the target's transfer ended $(($(count_in "$T/tgt.out" '^bulk-end ') - be0)) times"
            set -- $be
            [ "${2:-}" != CW_OK ] || cell_fail "the target's transfer ended CW_OK"
            CELL[$v.$ph]="${CELL[$v.$ph]}; target's transfer $2 $(($4 - t_kill)) ms"
            DETAIL[$v.$ph]="${DETAIL[$v.$ph]}; the target's transfer (its own operation) ended once, $2, $(($4 - t_kill)) ms after the kill"
            ;;
        forwarding)
            wait_s $IDLE_S at_least "$T/tgt.out" '^answered ' $((ans0 + n)) ||
                cell_fail "the target's answers did not all complete"
            DETAIL[$v.$ph]="${DETAIL[$v.$ph]}; the target's $n answers completed once each: $(awk -v a="$ans0" '/^answered / && ++k > a {print $2}' "$T/tgt.out" | sort | uniq -c | awk '{printf "%s%sx%s", s, $2, $1; s=","}')"
            ;;
        esac
    fi
    # The gateway back to idle (a stopped target stays stopped meanwhile,
    # but for one cell over verbs, below).
    resumed=""
    if [ "$TGT_FABRIC.$v.$ph" = verbs.stop.before ]; then
        # The fake device acknowledges a SEND from the receiving process's
        # own calls (docs/na-verbs.md, "The fake device"); an HCA does it
        # without the process, so a stopped target's requests complete
        # their sends there and the cell's idle rule holds while it stays
        # stopped.  Here the gateway's sends wait for the target's CPU:
        # the caller's view above is checked while it is stopped, the
        # gateway's return to idle after SIGCONT.
        kill -CONT "$tgt_PID"
        resumed=" (after SIGCONT: a SEND to a stopped process is acknowledged only by an HCA, not by the fake device)"
    fi
    [ "$oroute" = - ] || DETAIL[$v.$ph]="${DETAIL[$v.$ph]}; other route $oroute"
    # Every gateway left alive back to idle ("front", the middle ones and
    # "gw" in a chain).
    for Q in $GWS; do
        [ "$v" != "$Q" ] && [ "$v.$Q" != gateway.gw ] || continue
        case $CHAIN.$Q in
        0.*) qn=gateway ;;
        *.gw) qn="far gateway" ;;
        *.mid) qn="middle gateway" ;;
        *.mid*) qn="middle ${Q#mid} gateway" ;;
        *) qn=front ;;
        esac
        if wait_s $IDLE_S gw_idle; then
            t_idle=$(($(now_ms) - t_kill))
            idle="$t_idle ms"
        else
            idle="NOT IDLE"
            cell_fail "$qn not idle $IDLE_S s after the kill: fds $(gw_fds) (before $(eval "echo \$FDS0_$Q"); $FD_WHY), $(stats | head -c 300) unanswered $(metric causeway_gateway_unanswered_requests) uncollected $(metric causeway_gateway_uncollected_answers)"
        fi
        CELL[$v.$ph]="${CELL[$v.$ph]}; ${qn% gateway} idle $idle${resumed:+ after SIGCONT}"
        DETAIL[$v.$ph]="${DETAIL[$v.$ph]}; $qn idle after $idle$resumed, fds $(eval "echo \$FDS0_$Q") -> $(gw_fds)$(n=$(new_fds | wc -l); [ "$n" = 0 ] || echo " ($n new: connections to live peers)")"
    done
    Q=gw
    case $v in
    gateway | front | mid*)
        case $v in
        gateway) gw_up ;;
        mid*) mid_up "$v" ;;
        *) front_up ;;
        esac
        ping_expect "$v/$ph: the restarted $v serves" CW_OK -c 5 "$other@$(gw_in)" >/dev/null
        DETAIL[$v.$ph]="${DETAIL[$v.$ph]}; the restarted $v serves"
        ;;
    esac
    case $v in
    stop | target) tgt_kill ;;
    esac
    alive "$cli_PID" && kill -KILL "$cli_PID"
    wait "$cli_PID" 2>/dev/null
    if [ -n "$CELL_BAD" ]; then
        CELL[$v.$ph]="FAIL (${CELL[$v.$ph]:-})"
        FAILED="$FAILED
  $v/$ph: $CELL_BAD"
        echo "not ok - $v/$ph: $CELL_BAD"
        echo "--- caller:"
        tail -n 5 "$T/c.out" "$T/c.log" 2>/dev/null | sed 's/^/    /'
    else
        echo "ok - $v/$ph: ${DETAIL[$v.$ph]}"
    fi
}

# CELLS ("VICTIM/PHASE ..."): only those cells, in that order.
if [ -z "${CELLS:-}" ]; then
    for v in $VICTIMS; do
        for ph in $PHASES; do CELLS="${CELLS:-} $v/$ph"; done
    done
fi
started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
t_all=$(now_ms)
NCELLS=0
for c in $CELLS; do
    # An answer over shm is read by the gateway without the target's
    # progress (na-shm reads the process's memory), so a target that stops
    # or dies after sending it cannot hold the response phase: the gateway
    # has it whole first.
    # Over verbs the gateway pulls it with RDMA READs, which the HCA (and
    # the fake device, docs/na-verbs.md) serves without the target's CPU.
    case $TGT_FABRIC.$c in
    shm.target/response | shm.stop/response | verbs.target/response | verbs.stop/response)
        echo "# $c: no such phase over $TGT_FABRIC (the answer is read without the target's progress)"
        CELL[${c%/*}.${c#*/}]="n/a over $TGT_FABRIC"
        continue
        ;;
    esac
    # In a chain the front pulls an overflowed answer whole from the far
    # gateway before the caller gets its header (docs/gateway.md,
    # "Forwarding, step by step"): a caller paused mid-response holds the
    # front, not the far gateway (nor the middle one).
    case $CHAIN.$c in
    [1-6].gateway/response | [2-6].mid*/response)
        echo "# $c: no such phase in a chain (the front has the whole answer before the caller reads it)"
        CELL[${c%/*}.${c#*/}]="n/a in a chain"
        continue
        ;;
    esac
    # Likewise a request's arguments over shm: the gateway reads them
    # without the caller's progress.
    case $CLI_FABRIC.$c in
    shm.*/request | verbs.*/request)
        echo "# $c: no such phase over $CLI_FABRIC (the arguments are read without the caller's progress)"
        CELL[${c%/*}.${c#*/}]="n/a over $CLI_FABRIC"
        continue
        ;;
    esac
    cell "${c%/*}" "${c#*/}"
    NCELLS=$((NCELLS + 1))
done

# ---- failover: two gateways on a route, one killed ------------------------
FO=""
if [ "$FAILOVER" = 1 ]; then
    alive "$tgt_PID" || tgt_up
    for g in gwa gwb; do
        cat >"$T/$g.yaml" <<YAML
gateway: { name: $g, admin: "" }
networks:
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
  - { name: ucx0, address: "ucx+tcp://127.0.0.1:0" }
YAML
        start_gw "$g" "$T/$g.yaml"
    done
    cat >"$T/front.yaml" <<YAML
gateway: { name: front, admin: "127.0.0.1:$(free_port)" }
networks:
  - { name: shm0, address: "shm://$TAG-front" }
  - { name: tcp0, address: "ofi+tcp://127.0.0.1:0" }
routes:
  - { dest: "ucx+tcp://*", gateway: "$gwa_tcp0" }
  - { dest: "ucx+tcp://*", gateway: "$gwb_tcp0" }
health: { interval: 200ms, timeout: 200ms, eject_after: 2, recover_after: 2 }
YAML
    start_gw front "$T/front.yaml"
    hop_up() {
        local a
        eval "a=\$${1}_tcp0"
        "$CWCTL" --admin "$front_admin" routes --json |
            grep -q "\"nexthop\":\"$a\"[^}]*\"state\":\"up\""
    }
    hop_used() {
        local a
        eval "a=\$${1}_tcp0"
        "$CWCTL" --admin "$front_admin" routes --json |
            grep -q "\"nexthop\":\"$a\"[^}]*\"forwarded\":[1-9]"
    }
    wait_for hop_up gwa && wait_for hop_up gwb || fail "failover: both hops not up"
    rm -f "$T/fo.stop"
    "$KP" stream "$tgt@$front_shm0" --inflight 4 --timeout 2000 \
        --duration $((FAILOVER_S + 60)) --stop "$T/fo.stop" >"$T/fo.out" 2>"$T/fo.log" &
    fo_PID=$!
    PIDS="$PIDS $!"
    wait_for_s 30 line_in "$T/fo.out" '^ready$' || fail "failover: the stream did not start: $(cat "$T/fo.log")"
    wait_for hop_used gwa && wait_for hop_used gwb ||
        fail "failover: the calls are not spread over both gateways: $("$CWCTL" --admin "$front_admin" routes --json)"
    t_kill=$(now_ms)
    gw_kill "$gwa_PID"
    # Calls for FAILOVER_S seconds after the kill.
    fo_later() { awk -v t=$((t_kill + FAILOVER_S * 1000)) '/^rpc / && $2 >= t { f = 1 } END { exit !f }' "$T/fo.out"; }
    wait_for_s $((FAILOVER_S + 30)) fo_later || fail "failover: no call started $FAILOVER_S s after the kill"
    touch "$T/fo.stop"
    wait "$fo_PID"
    read -r fo_n fo_ok fo_before fo_last fo_after fo_max <<<"$(awk -v k="$t_kill" '
        /^rpc / { n++; if ($4 == "CW_OK") ok++; else if ($2 < k) before++;
                  else if ($2 - k > last) last = $2 - k;
                  if ($2 >= k + 2000 && $4 != "CW_OK") after++;
                  if ($3 - $2 > max) max = $3 - $2 }
        END { printf "%d %d %d %d %d %d\n", n, ok, before, last, after, max }' "$T/fo.out")"
    fo_failed_after=$(awk -v k="$t_kill" '/^rpc / && $2 >= k && $4 != "CW_OK"' "$T/fo.out" | wc -l)
    fo_stat=$(awk -v k="$t_kill" '/^rpc / && $4 != "CW_OK" { print $4 }' "$T/fo.out" | sort | uniq -c | awk '{printf "%s%sx%s", s, $2, $1; s=","}')
    FO="$fo_n calls, $fo_ok CW_OK; failed: ${fo_stat:-none} ($fo_before started before the kill, $fo_failed_after after it, the last $fo_last ms after it); started >= 2 s after: $fo_after failed; longest call $fo_max ms"
    if [ "$fo_after" = 0 ] && [ "$fo_max" -le 3000 ] && [ "$fo_last" -lt 2000 ]; then
        echo "ok - failover: $FO"
    else
        FAILED="$FAILED
  failover: $FO"
        echo "not ok - failover: $FO"
    fi
    gw_stop_clean gwb front
fi

# ---- the matrix ------------------------------------------------------------
total_s=$((($(now_ms) - t_all) / 1000))
echo
echo "Kill matrix, $started, $(uname -n), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "  DEADLINE_MS=$DEADLINE_MS HOLD_MS=$HOLD_MS NHOLD=$NHOLD BULK_LEN=$BULK_LEN BIG_LEN=$BIG_LEN GW_THREADS=$GW_THREADS; $total_s s"
if [ "$CHAIN" != 0 ]; then
    mp=""
    for m in $MIDS; do mp=" $m -[$HOP_FABRIC]->$mp"; done
    echo "  path: caller -[$CLI_FABRIC]-> front -[$HOP_FABRIC]->$mp causewayd (far) -[$TGT_FABRIC]-> target; other route: $TGT_FABRIC echo"
    echo "  cell: statuses at the origin (xN); the slowest, ms after it was sent; each live gateway idle, ms after the kill"
else
    echo "  path: caller -[$CLI_FABRIC]-> causewayd -[$TGT_FABRIC]-> target; other route: $TGT_FABRIC echo"
    echo "  cell: statuses at the origin (xN); the slowest, ms after it was sent; gateway idle, ms after the kill"
fi
printf '| victim \\ phase |'
for ph in $PHASES; do printf ' %s |' "$ph"; done
echo
printf '|---|'
for ph in $PHASES; do printf -- '---|'; done
echo
for v in $VICTIMS; do
    case " $CELLS" in *" $v/"*) ;; *) continue ;; esac
    case $v in
    target) printf '| kill -9 target |' ;;
    gateway) printf '| kill -9 %s |' "$([ "$CHAIN" != 0 ] && echo "far gateway" || echo gateway)" ;;
    front) printf '| kill -9 front gateway |' ;;
    mid) printf '| kill -9 middle gateway |' ;;
    mid*) printf '| kill -9 middle gateway %s |' "${v#mid}" ;;
    client) printf '| kill -9 caller |' ;;
    stop) printf '| SIGSTOP target |' ;;
    esac
    for ph in $PHASES; do printf ' %s |' "${CELL[$v.$ph]:-}"; done
    echo
done
[ -n "$FO" ] && echo "| two gateways, one killed | $FO |"
gw_stop_clean $GWS
[ -z "$FAILED" ] || fail "kill matrix:$FAILED"
pass "kill matrix: all $NCELLS cells passed${FO:+, and the failover}"
