#!/bin/sh
# The systemd units' hardening: `systemd-analyze security` rates each
# built unit at most 4.0 (issue 29: the unit ran as root with none, 9.6
# UNSAFE).  Offline: no running systemd needed.
#   unit_security.sh UNIT...
set -u
MAX=4.0
if ! command -v systemd-analyze >/dev/null; then
    echo "SKIP: systemd-analyze not installed: the units' exposure is not rated"
    exit 77
fi
T=$(mktemp -d /tmp/cw-unit-security.XXXXXX) || exit 1
trap 'rm -rf "$T"' EXIT
fails=0
for u in "$@"; do
    name=$(basename "$u")
    # A template is rated as one of its instances.
    case $name in *@.service) name=${name%@.service}@check.service ;; esac
    cp "$u" "$T/$name"
    systemd-analyze security --offline=yes --threshold=40 "$T/$name" >"$T/out" 2>&1
    rc=$?
    level=$(sed -n 's/.*Overall exposure level for .*: \([0-9.]*\) .*/\1/p' "$T/out")
    if [ -z "$level" ]; then
        if grep -q "unrecognized option\|Unknown option" "$T/out"; then
            echo "SKIP: this systemd-analyze has no --offline: $(head -n 1 "$T/out")"
            exit 77
        fi
        echo "FAIL: $name: no rating: $(tail -n 5 "$T/out")"
        fails=$((fails + 1))
    elif [ $rc -ne 0 ]; then
        echo "FAIL: $name: exposure $level, above $MAX:"
        grep '✗' "$T/out"
        fails=$((fails + 1))
    else
        echo "ok - $name: exposure $level (at most $MAX)"
    fi
done
[ $fails -eq 0 ]
