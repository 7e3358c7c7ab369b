#!/bin/sh
# libcauseway exports exactly what is declared CW_PUBLIC: the API in
# include/causeway/ and the few internals core/*.h marks for causewayd and
# the white-box tests.  Everything else is built hidden (TAP).
# usage: test_lib_exports.sh LIBCAUSEWAY.so SOURCE_ROOT
LIB=$1
SRC=$2
TMP=$(mktemp -d /tmp/cw-lib-exports.XXXXXX) || exit 1
trap 'rm -rf "$TMP"' EXIT
echo "1..3"

# Defined dynamic symbols (functions and variables) of the library, less
# the toolchain's own (_init, a sanitizer's __odr_asan.* and the like).
nm -D --defined-only "$LIB" | awk '$2 ~ /^[TDBRV]$/ && $3 !~ /^_/ { print $3 }' |
    sort -u >"$TMP/exported"

# The name each CW_PUBLIC declaration declares: the last identifier before
# its parameter list, or before the ';' of a variable.  A declaration may
# span lines (return type on the line above its name).
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
    }' "$SRC"/include/causeway/*.h "$SRC"/core/*.h | sort -u >"$TMP/declared"

n_exp=$(wc -l <"$TMP/exported")
n_dec=$(wc -l <"$TMP/declared")
if [ "$n_dec" -ge 150 ]; then
    echo "ok 1 - $n_dec CW_PUBLIC declarations found"
else
    echo "not ok 1 - only $n_dec CW_PUBLIC declarations found (parser broken?)"
fi

extra=$(comm -23 "$TMP/exported" "$TMP/declared" | tr '\n' ' ')
if [ -z "$extra" ]; then
    echo "ok 2 - nothing exported beyond the declarations ($n_exp symbols)"
else
    echo "not ok 2 - exported but not declared CW_PUBLIC: $extra"
fi

missing=$(comm -13 "$TMP/exported" "$TMP/declared" | tr '\n' ' ')
if [ -z "$missing" ]; then
    echo "ok 3 - every CW_PUBLIC declaration is exported"
else
    echo "not ok 3 - declared CW_PUBLIC but not exported: $missing"
fi
