#!/bin/bash
# cw-perf checks what it moves (issue 33), over every fabric cw-info finds
# (TAP).  For shm, ofi+tcp and ucx+tcp, against a real server process:
#  - lat, rate (payload both ways) and bw (pull and push) with --verify
#    pass, and their JSON has per-call p50 <= p99 <= p99.9 <= max;
#  - a timing run (no --verify) with --reply-size writes the --csv columns;
#  - a server with --contexts 3 echoes for three clients at once, and more
#    than one of its contexts served them;
#  - a server with --chunk 64K --depth 2 moves verified 1 MiB transfers
#    (16 chunks, 2 in flight) both ways;
#  - a server that flips a byte of every 5th verified answer or transfer
#    (CW_PERF_CORRUPT=5) fails lat, rate, bw pull and bw push with exit 1
#    and "verify failed"; a client that corrupts its requests is caught by
#    the server's check;
#  - every server exits 0 on "cw-perf quit" (the sanitizers' leak check).
# A fabric is skipped, each of its tests saying why, only when cw-info
# reports its plugin or protocol unavailable.
# usage: perf_verify.sh CW_PERF CW_INFO
set -u
PERF=$1
INFO=$2
T=$(mktemp -d /tmp/cw-perf-verify.XXXXXX) || exit 1
SERVERS=""
cleanup() {
    for p in $SERVERS; do
        kill "$p" 2>/dev/null
    done
    wait 2>/dev/null
    rm -rf "$T"
}
trap cleanup EXIT

FABRICS="shm=shm:// ofi-tcp=ofi+tcp://127.0.0.1:0 ucx-tcp=ucx+tcp://127.0.0.1:0"
PER_FABRIC=18
echo "1..$((3 * PER_FABRIC))"
n=0
fails=0
ok() {
    n=$((n + 1))
    echo "ok $n - $1"
}
# not_ok NAME [FILE...]: the files' first lines go to the TAP comments.
not_ok() {
    local f
    n=$((n + 1))
    fails=$((fails + 1))
    echo "not ok $n - $1"
    shift
    for f in "$@"; do
        [ -r "$f" ] && head -c 2000 "$f" | sed "s|^|# ${f##*/}: |"
    done
}

# start_server NAME URI [OPTIONS...]: a server in the background, its
# address in $T/NAME.addr (waited for, 60 s at most); sets SRV_PID.
start_server() {
    local name=$1 uri=$2
    shift 2
    rm -f "$T/$name.addr"
    "$PERF" server --listen "$uri" --addr-file "$T/$name.addr" "$@" \
        >"$T/$name.out" 2>"$T/$name.log" &
    SRV_PID=$!
    SERVERS="$SERVERS $SRV_PID"
    for _ in $(seq 600); do
        [ -s "$T/$name.addr" ] && return 0
        kill -0 "$SRV_PID" 2>/dev/null || return 1
        sleep 0.1 # sleep-ok: poll step of a bounded wait for the address file
    done
    return 1
}

# stop_server NAME PID: "cw-perf quit", then the server's exit status
# (124 if it is still there after 60 s).
stop_server() {
    local name=$1 pid=$2 rc
    "$PERF" quit --target "$(cat "$T/$name.addr")" >/dev/null 2>&1
    for _ in $(seq 600); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1 # sleep-ok: poll step of a bounded wait for the exit
    done
    if kill -0 "$pid" 2>/dev/null; then
        kill -9 "$pid" 2>/dev/null
        wait "$pid" 2>/dev/null
        return 124
    fi
    wait "$pid"
    rc=$?
    SERVERS=$(echo "$SERVERS" | sed "s/ $pid\b//")
    return "$rc"
}

# client OUT TARGET OPTIONS...: a client run, stdout in OUT, stderr in
# OUT.err; its exit status.
client() {
    local out=$1 target=$2
    shift 2
    timeout 120 "$PERF" client --target "$target" "$@" >"$out" 2>"$out.err"
}

# json_ok FILE NRESULTS: verify on, NRESULTS results, each with its call
# count and ordered percentiles (and the fields the bench scripts read).
json_ok() {
    python3 - "$1" "$2" <<'EOF' 2>>"$1.err"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["verify"] is True, "verify is not on"
rs = d["results"]
assert len(rs) == int(sys.argv[2]), "%d results" % len(rs)
for r in rs:
    for k in ("size", "median", "min", "max", "calls",
              "p50_us", "p99_us", "p999_us", "max_us"):
        assert k in r, "no %s in %r" % (k, r)
    assert r["calls"] > 0, r
    assert 0 < r["p50_us"] <= r["p99_us"] <= r["p999_us"] <= r["max_us"], r
    assert r["median"] > 0, r
EOF
}

# caught NAME FILE RC PATTERN: the run failed with exit 1 and said PATTERN.
caught() {
    if [ "$3" = 1 ] && grep -q "verify failed: .*$4" "$2.err"; then
        ok "$1"
    else
        not_ok "$1 (exit $3)" "$2.err" "$2"
    fi
}

run_fabric() {
    local fab=$1 uri=$2 addr rc pid pids i busy
    local o=$T/$fab

    # 1-6: a plain server, verified runs and a timing run.
    if ! start_server "$fab" "$uri"; then
        not_ok "$fab: server starts" "$T/$fab.log"
        for i in $(seq $((PER_FABRIC - 1))); do
            not_ok "$fab: (no server)"
        done
        return
    fi
    pid=$SRV_PID
    ok "$fab: server starts"
    addr=$(cat "$T/$fab.addr")

    client "$o.lat" "$addr" --test lat --verify --sizes 0,64,4K,64K \
        --iters 300 --reps 2 --json
    rc=$?
    if [ "$rc" = 0 ] && json_ok "$o.lat" 4; then
        ok "$fab: lat --verify, 0 B to 64 KiB, percentiles ordered"
    else
        not_ok "$fab: lat --verify (exit $rc)" "$o.lat.err" "$o.lat"
    fi

    client "$o.rate" "$addr" --test rate --verify --reply-size 3000 \
        --sizes 64,8K --inflight 8 --iters 400 --reps 2 --json
    rc=$?
    if [ "$rc" = 0 ] && json_ok "$o.rate" 2 &&
        grep -q '"reply":3000' "$o.rate"; then
        ok "$fab: rate --verify --reply-size 3000, 8 in flight"
    else
        not_ok "$fab: rate --verify --reply-size (exit $rc)" "$o.rate.err" \
            "$o.rate"
    fi

    client "$o.bw" "$addr" --test bw --verify --sizes 64K,1M --inflight 3 \
        --iters 12 --reps 2 --json
    rc=$?
    if [ "$rc" = 0 ] && json_ok "$o.bw" 4 &&
        [ "$(grep -o '"dir":"pu[a-z]*"' "$o.bw" | sort -u | wc -l)" = 2 ]; then
        ok "$fab: bw --verify pull and push, 3 in flight"
    else
        not_ok "$fab: bw --verify (exit $rc)" "$o.bw.err" "$o.bw"
    fi

    # A timing run: handles reused, the reply's length still checked.
    busy=""
    [ "$fab" = shm ] && busy=--busy
    client "$o.csv" "$addr" --test rate --reply-size 1K --sizes 64,1K \
        --iters 500 --reps 2 --csv $busy
    rc=$?
    if [ "$rc" = 0 ] &&
        head -n 1 "$o.csv" | grep -q ',median,.*,calls,p50_us,p99_us,p999_us,max_us$' &&
        [ "$(grep -c '^rate,' "$o.csv")" = 2 ]; then
        ok "$fab: rate --reply-size 1K --csv without --verify"
    else
        not_ok "$fab: rate --csv (exit $rc)" "$o.csv.err" "$o.csv"
    fi

    if stop_server "$fab" "$pid"; then
        ok "$fab: server exits 0"
    else
        not_ok "$fab: server exits 0 (exit $?)" "$T/$fab.log"
    fi

    # 7-9: three clients at once on a server with three contexts.
    if start_server "$fab-ctx" "$uri" --contexts 3; then
        pid=$SRV_PID
        addr=$(cat "$T/$fab-ctx.addr")
        pids=""
        for i in 1 2 3; do
            if [ "$i" = 3 ]; then
                client "$o.ctx$i" "$addr" --test rate --verify --sizes 64,4K \
                    --inflight 4 --iters 400 --reps 2 --json &
            else
                client "$o.ctx$i" "$addr" --test lat --verify --sizes 64,4K \
                    --iters 400 --reps 2 --json &
            fi
            pids="$pids $!"
        done
        rc=0
        for i in $pids; do
            wait "$i" || rc=$?
        done
        if [ "$rc" = 0 ] && json_ok "$o.ctx1" 2 && json_ok "$o.ctx2" 2 &&
            json_ok "$o.ctx3" 2; then
            ok "$fab: --contexts 3 echoes verified for three clients"
        else
            not_ok "$fab: --contexts 3, three clients (exit $rc)" \
                "$o.ctx1.err" "$o.ctx2.err" "$o.ctx3.err"
        fi
        if stop_server "$fab-ctx" "$pid"; then
            ok "$fab: --contexts 3 server exits 0"
        else
            not_ok "$fab: --contexts 3 server exits 0" "$T/$fab-ctx.log"
        fi
        # Each client made at least 2 x (440 + 400) calls.
        if [ "$(awk '/served/ && $5 >= 800' "$T/$fab-ctx.log" | wc -l)" -ge 2 ]; then
            ok "$fab: more than one context served"
        else
            not_ok "$fab: more than one context served" "$T/$fab-ctx.log"
        fi
    else
        not_ok "$fab: --contexts 3 server starts" "$T/$fab-ctx.log"
        not_ok "$fab: --contexts 3 server exits 0"
        not_ok "$fab: more than one context served"
    fi

    # 10-11: the server's bulk split size and depth.
    if start_server "$fab-chunk" "$uri" --chunk 64K --depth 2; then
        pid=$SRV_PID
        addr=$(cat "$T/$fab-chunk.addr")
        client "$o.chunk" "$addr" --test bw --verify --sizes 1M,300K \
            --inflight 2 --iters 6 --reps 1 --json
        rc=$?
        if [ "$rc" = 0 ] && json_ok "$o.chunk" 4; then
            ok "$fab: bw --verify in 64 KiB chunks, 2 in flight"
        else
            not_ok "$fab: bw --verify, --chunk 64K --depth 2 (exit $rc)" \
                "$o.chunk.err" "$o.chunk"
        fi
        if stop_server "$fab-chunk" "$pid"; then
            ok "$fab: --chunk server exits 0"
        else
            not_ok "$fab: --chunk server exits 0" "$T/$fab-chunk.log"
        fi
    else
        not_ok "$fab: --chunk 64K --depth 2 server starts" "$T/$fab-chunk.log"
        not_ok "$fab: --chunk server exits 0"
    fi

    # 12-17: corruption is caught, at either end.
    if CW_PERF_CORRUPT=5 start_server "$fab-bad" "$uri" &&
        grep -q "CW_PERF_CORRUPT=5" "$T/$fab-bad.log"; then
        pid=$SRV_PID
        addr=$(cat "$T/$fab-bad.addr")
        client "$o.blat" "$addr" --test lat --verify --sizes 64,4K \
            --iters 100 --reps 1
        caught "$fab: a corrupted echo fails lat" "$o.blat" $? "reply byte"
        client "$o.brate" "$addr" --test rate --verify --reply-size 4K \
            --sizes 16 --iters 100 --reps 1
        caught "$fab: a corrupted reply fails rate (reply beyond request)" \
            "$o.brate" $? "reply byte"
        client "$o.bpull" "$addr" --test bw --dir pull --verify --sizes 1M \
            --inflight 2 --iters 12 --reps 1
        caught "$fab: a corrupted pull fails bw, found by the server" \
            "$o.bpull" $? "the server pulled byte"
        client "$o.bpush" "$addr" --test bw --dir push --verify --sizes 1M \
            --inflight 2 --iters 12 --reps 1
        caught "$fab: a corrupted push fails bw" "$o.bpush" $? \
            "the server pushed byte"
        # The client's corrupted request, found by a server's check.
        CW_PERF_CORRUPT=3 client "$o.breq" "$addr" --test rate --verify \
            --reply-size 0 --sizes 4K --iters 100 --reps 1
        caught "$fab: a corrupted request is found by the server" \
            "$o.breq" $? "the server found request byte"
        if stop_server "$fab-bad" "$pid"; then
            ok "$fab: corrupting server exits 0"
        else
            not_ok "$fab: corrupting server exits 0" "$T/$fab-bad.log"
        fi
    else
        not_ok "$fab: corrupting server starts" "$T/$fab-bad.log"
        for i in $(seq 5); do
            not_ok "$fab: (no corrupting server)"
        done
    fi
    # 18: nothing the processes printed is a sanitizer report.
    if ! grep -l "Sanitizer\|runtime error" "$o".*err "$T/$fab"*.log \
        >"$T/$fab.san" 2>/dev/null; then
        ok "$fab: no sanitizer reports"
    else
        not_ok "$fab: sanitizer reports" $(cat "$T/$fab.san")
    fi
}

for f in $FABRICS; do
    fab=${f%%=*}
    uri=${f#*=}
    probe=$("$INFO" "$uri" 2>&1 | grep -F "$uri" | head -n 1 |
        sed 's/  */ /g; s/^ //')
    case $probe in
    *" ok: "*)
        run_fabric "$fab" "$uri"
        ;;
    *)
        echo "# $fab: cw-info says: ${probe:-nothing about $uri}" >&2
        for _ in $(seq "$PER_FABRIC"); do
            n=$((n + 1))
            echo "ok $n # SKIP $fab: cw-info: ${probe:-$uri not probed}"
        done
        ;;
    esac
done
[ "$fails" = 0 ]
