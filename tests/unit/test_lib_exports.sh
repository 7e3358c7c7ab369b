#!/bin/sh
# Each library exports exactly what its headers declare CW_PUBLIC, and every
# installed header that declares anything belongs to exactly one library
# (libcauseway: the API; libcauseway-routes: config and routing).
# Everything else is built hidden (TAP).
# usage: test_lib_exports.sh SOURCE_ROOT LIB=HEADER[,HEADER...] ...
#   HEADER: a path under SOURCE_ROOT.
SRC=$1
shift
TMP=$(mktemp -d /tmp/cw-lib-exports.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
echo "1..$(($# * 3 + 1))"
n=0
fails=0

result() { # ok(0/1), description
    n=$((n + 1))
    if [ "$1" = 0 ]; then
        echo "ok $n - $2"
    else
        echo "not ok $n - $2"
        fails=$((fails + 1))
    fi
}

# The name each CW_PUBLIC declaration declares: the last identifier before
# its parameter list, or before the ';' of a variable.  A declaration may
# span lines (return type on the line above its name).
declared() {
    awk '
        /^CW_PUBLIC / { decl = ""; on = 1 }
        on {
            decl = decl " " $0
            if (decl ~ /[(;]/) {
                sub(/[(;].*/, "", decl)
                n = split(decl, w, /[^A-Za-z0-9_]+/)
                while (n > 0 && w[n] == "") n--
                print w[n]
                on = 0
            }
        }' "$@"
}

: >"$TMP/named"
for spec in "$@"; do
    lib=${spec%%=*}
    name=$(basename "$lib")
    hdrs=""
    for h in $(echo "${spec#*=}" | tr ',' ' '); do
        hdrs="$hdrs $SRC/$h"
        echo "$h" >>"$TMP/named"
    done

    # Defined dynamic symbols (functions and variables) of the library,
    # less the toolchain's own (_init, a sanitizer's __odr_asan.* and the
    # like).
    nm -D --defined-only "$lib" |
        awk '$2 ~ /^[TDBRV]$/ && $3 !~ /^_/ { print $3 }' |
        sort -u >"$TMP/exported"
    # shellcheck disable=SC2086 # one word per header
    declared $hdrs | sort -u >"$TMP/declared"

    empty=""
    for h in $hdrs; do
        [ -n "$(declared "$h")" ] || empty="$empty ${h#"$SRC"/}"
    done
    n_exp=$(wc -l <"$TMP/exported")
    n_dec=$(wc -l <"$TMP/declared")
    if [ -z "$empty" ]; then
        result 0 "$name: $n_dec CW_PUBLIC declarations in its headers"
    else
        result 1 "$name: no CW_PUBLIC declaration found in$empty (parser broken?)"
    fi

    extra=$(comm -23 "$TMP/exported" "$TMP/declared" | tr '\n' ' ')
    if [ -z "$extra" ]; then
        result 0 "$name: nothing exported beyond the declarations ($n_exp symbols)"
    else
        result 1 "$name: exported but not declared CW_PUBLIC: $extra"
    fi

    missing=$(comm -13 "$TMP/exported" "$TMP/declared" | tr '\n' ' ')
    if [ -z "$missing" ]; then
        result 0 "$name: every CW_PUBLIC declaration is exported"
    else
        result 1 "$name: declared CW_PUBLIC but not exported: $missing"
    fi
done

# Installed headers with declarations, each given to exactly one library.
unowned=""
for h in "$SRC"/include/causeway/*.h; do
    rel=${h#"$SRC"/}
    [ -n "$(declared "$h")" ] || continue
    c=$(grep -cxF "$rel" "$TMP/named")
    [ "$c" = 1 ] || unowned="$unowned $rel($c)"
done
if [ -z "$unowned" ]; then
    result 0 "every header of include/causeway/ with declarations belongs to one library"
else
    result 1 "headers given to no library or to several (times named):$unowned"
fi
[ "$fails" = 0 ]
