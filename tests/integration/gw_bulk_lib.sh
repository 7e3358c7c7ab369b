# Helpers of the gw_bulk_*.sh tests (sourced after gw_lib.sh; bash).
#   gw_bulk_*.sh CAUSEWAYD CW_PING CWCTL TEST_GWBULK_XFER
XFER=$4
gw_vg_wrap XFER test_gwbulk_xfer # under memcheck too with CW_VALGRIND

# bulk_srv NAME URI [ALT_URI]: a test_gwbulk_xfer server; sets $NAME (its
# address) and ${NAME}_PID.
bulk_srv() {
    rm -f "$T/$1.addr"
    "$XFER" serve "$2" "$T/$1.addr" ${3:+"$3"} 2>"$T/$1.log" &
    eval "${1}_PID=$!"
    PIDS="$PIDS $!"
    wait_for addr_ready "$T/$1.addr" "$!" || fail "server $1 ($2) did not start"
    eval "$1=\$(cat \"\$T/\$1.addr\")"
}

# bulk_gw NAME "NET=URI NET=URI" "CHUNK DEPTH STAGING [ZERO_COPY]" [ADMIN]:
# a gateway with these networks and buffers (staging also bounds the bytes
# in flight); sets what start_gw sets.
bulk_gw() {
    local n u chunk depth staging zc
    read -r chunk depth staging zc <<<"$3"
    {
        echo "gateway: { name: $1, admin: \"${4:-}\" }"
        echo "networks:"
        for n in $2; do
            u=${n#*=}
            echo "  - { name: ${n%%=*}, address: \"$u\" }"
        done
        echo "buffers: { chunk: $chunk, depth: $depth, staging: $staging${zc:+, zero_copy: $zc} }"
        echo "limits: { max_bulk_bytes_inflight: $staging }"
    } >"$T/$1.yaml"
    start_gw "$1" "$T/$1.yaml"
}

# xfer WHAT TARGET SIZES [SEED]: pull and push each size, checksummed.
xfer() {
    timeout 240 "$XFER" run "$2" "$3" ${4:+"$4"} >"$T/out" 2>"$T/client.log"
    local rc=$?
    sed "s/^/    /" "$T/out"
    [ $rc = 0 ] || fail "$1 (rc $rc)"
    pass "$1"
}

# mid_pull ADMIN USES0: the gateway at ADMIN has a transfer in its
# pipeline that has used 64 staging chunks since its count was USES0.
mid_pull() {
    local s
    s=$("$CWCTL" --admin "$1" stats --json 2>/dev/null)
    [ "$(json_num "$s" active)" -ge 1 ] 2>/dev/null &&
        [ "$(json_num "$s" staging_uses)" -ge $(($2 + 64)) ]
}

# hold_start TARGET SIZE ADMIN [bare]: a long pull in the background
# ($HOLD_PID, its line in $T/hold.out; under `timeout 60` unless "bare",
# the client's own pid then), through the gateway at ADMIN; returns once
# it is mid-transfer there (mid_pull).
hold_start() {
    local u0 wrap=(timeout 60)
    [ "${4:-}" = bare ] && wrap=()
    u0=$(stat_of "$3" staging_uses)
    "${wrap[@]}" "$XFER" hold "$1" "$2" >"$T/hold.out" 2>"$T/hold.err" &
    HOLD_PID=$!
    wait_for mid_pull "$3" "${u0:-0}" || {
        kill "$HOLD_PID"
        fail "the pull was not seen mid-transfer at the gateway: $("$CWCTL" --admin "$3" stats --json)"
    }
}

# hold_kill WHAT PID TARGET SIZE ADMIN: start a long pull through the
# gateway at ADMIN, kill PID once the pipeline is mid-transfer; the
# origin's RPC must end with an error within its deadline (20 s) + 1 s.
hold_kill() {
    local st ms end killed
    hold_start "$3" "$4" "$5"
    killed=$(date +%s%3N)
    gw_kill "$2"
    wait "$HOLD_PID"
    read -r st ms end <"$T/hold.out"
    [ -n "$st" ] && [ "$st" != CW_OK ] && [ "${ms:-99999}" -le 21000 ] ||
        fail "$1 killed: origin got '$st' after ${ms:-?} ms"
    pass "$1 killed mid-transfer: origin's RPC ended $st after $ms ms, $((end - killed)) ms after the kill"
}

# victims_start ECHO_TARGET XFER_TARGET: callers meant to be killed mid-call:
# an echo client (64 KiB calls, 16 in flight, the data also as a bulk
# handle; give it a server with a delay) and a 256 MiB pull held in the
# gateway's staging.  Their pids go to $VICTIMS.
victims_start() {
    "$CW_PING" -q -c 1000000 -n 16 -t 5000 -s 64K --with-bulk \
        "$1" >/dev/null 2>&1 &
    VICTIMS="${VICTIMS:-} $!"
    "$XFER" hold "$2" 256M >/dev/null 2>&1 &
    VICTIMS="$VICTIMS $!"
}

# victims_kill: kill -9 every victim, reap it, remove its shm segments.
victims_kill() {
    local p
    # shellcheck disable=SC2086
    kill -KILL $VICTIMS 2>/dev/null
    for p in $VICTIMS; do
        wait "$p" 2>/dev/null
        rm -f /dev/shm/causeway-p"$p"-*
    done
    VICTIMS=""
}
