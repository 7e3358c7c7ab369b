#!/bin/sh
# The core stands alone: libcauseway and a program that links only it
# (cw-demo) load no libyaml; libcauseway-routes brings it (TAP).
# usage: test_lib_layers.sh LIBCAUSEWAY PROGRAM LIBCAUSEWAY_ROUTES
echo "1..3"
n=0
fails=0
check() { # description, ldd target, pattern, wanted (yes/no)
    n=$((n + 1))
    if ! out=$(ldd "$2" 2>&1); then
        echo "not ok $n - $1: ldd $2 failed: $out"
        fails=$((fails + 1))
        return
    fi
    if echo "$out" | grep -q "$3"; then got=yes; else got=no; fi
    if [ "$got" = "$4" ]; then
        echo "ok $n - $1"
    else
        echo "not ok $n - $1: ldd $2 gives: $(echo "$out" | tr '\n' ' ')"
        fails=$((fails + 1))
    fi
}
check "$(basename "$1") needs no libyaml" "$1" libyaml no
check "$(basename "$2"), linking only libcauseway, loads no libyaml" "$2" libyaml no
check "$(basename "$3") loads libyaml" "$3" libyaml yes
[ "$fails" = 0 ]
