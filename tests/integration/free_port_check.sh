#!/bin/bash
# free_port.py with a registry (TAP): 60 draws, then 4 x 15 drawn at once
# by parallel processes, are all distinct, below the ephemeral range and
# bindable when drawn; and an entry older than the hold is given again.
T=$(mktemp -d /tmp/cw-freeport.XXXXXX)
trap 'rm -rf "$T"' EXIT
FP="$(dirname "$0")/free_port.py"
echo "1..3"
fails=0
low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range)
for i in $(seq 1 60); do CW_PORT_REGISTRY=$T/reg python3 "$FP"; done >"$T/a"
for k in 1 2 3 4; do
    (for i in $(seq 1 15); do CW_PORT_REGISTRY=$T/reg python3 "$FP"; done >"$T/b$k") &
done
wait
cat "$T/a" "$T"/b? >"$T/all"
n=$(wc -l <"$T/all")
dup=$(sort "$T/all" | uniq -d | wc -l)
high=$(awk -v l="$low" '$1 >= l' "$T/all" | wc -l)
if [ "$n" = 120 ] && [ "$dup" = 0 ] && [ "$high" = 0 ]; then
    echo "ok 1 - 120 ports drawn (60, then 4 x 15 at once): all distinct, all below $low"
else
    echo "not ok 1 - $n drawn, $dup repeated, $high at or above $low"
    fails=$((fails + 1))
fi
if [ "$(wc -l <"$T/reg")" = 120 ]; then
    echo "ok 2 - the registry holds the 120"
else
    echo "not ok 2 - the registry holds $(wc -l <"$T/reg") lines"
    fails=$((fails + 1))
fi
# Entries past the hold (600 s) no longer count: age them all.
awk '{ printf "%s %.3f\n", $1, $2 - 601 }' "$T/reg" >"$T/old" && mv "$T/old" "$T/reg"
CW_PORT_REGISTRY=$T/reg python3 "$FP" >/dev/null
if [ "$(wc -l <"$T/reg")" = 1 ]; then
    echo "ok 3 - entries older than the hold are dropped"
else
    echo "not ok 3 - $(wc -l <"$T/reg") entries left after aging"
    fails=$((fails + 1))
fi
[ "$fails" = 0 ]
