#!/bin/bash
# The soak's checks work: soak.sh run with SOAK_CORRUPT=N (every side
# flips a byte of every Nth datum it sends, after its checksum: requests
# and pulled data at the clients, replies and pushed data at the servers)
# must fail, with corruption counted by the clients and by the servers,
# and nothing lost, duplicated or failed (the corruption is all there is).
#   detects.sh CAUSEWAYD CW_PING CWCTL SOAK
# Environment: that of soak.sh, passed on; SOAK_CORRUPT (25).
set -u
here=$(dirname "$0")
out=$(mktemp /tmp/cw-soak-detects.XXXXXX)
trap 'rm -f "$out"' EXIT

SOAK_CORRUPT=${SOAK_CORRUPT:-25} bash "$here/soak.sh" "$@" >"$out" 2>&1
rc=$?
# row TITLE: the value column of the table row starting with TITLE.
row() {
    grep -F "| $1" "$out" | head -n 1 | cut -d'|' -f3 | tr -d ' '
}
fails() {
    echo "not ok - $*"
    sed -n '/^Soak,/,$p' "$out" | head -n 40
    exit 1
}
[ $rc = 77 ] && { grep SKIP "$out"; exit 77; }
grep -q "^| result  *| FAIL |" "$out" || fails "soak.sh with SOAK_CORRUPT did not report FAIL (exit $rc)"
[ $rc != 0 ] || fails "soak.sh reported FAIL but exited 0"
IFS=/ read -r lost dup corrupt <<<"$(row "lost / duplicated / corrupted (clients)")"
IFS=/ read -r srpcs sdup scorrupt <<<"$(row "servers saw: RPCs / dup / corrupt")"
IFS=/ read -r failed unanswered <<<"$(row "failed / unanswered (clients)")"
[ "${corrupt:-0}" -gt 0 ] 2>/dev/null || fails "the clients counted no corruption"
[ "${scorrupt:-0}" -gt 0 ] 2>/dev/null || fails "the servers counted no corruption"
[ "$lost" = 0 ] && [ "$dup" = 0 ] && [ "$sdup" = 0 ] && [ "$failed" = 0 ] &&
    [ "$unanswered" = 0 ] || fails "more than corruption went wrong: lost $lost dup $dup/$sdup failed $failed unanswered $unanswered"
grep -q "^ok - gateways gw stopped cleanly" "$out" || fails "the gateway did not stop cleanly"
echo "ok - SOAK_CORRUPT=${SOAK_CORRUPT:-25}: soak.sh fails (exit $rc); corrupted: $corrupt counted by the clients, $scorrupt by the servers of $srpcs RPCs; nothing lost, duplicated or failed"
