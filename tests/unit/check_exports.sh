#!/bin/sh
# Each plugin module exports exactly one symbol: cw_na_plugin_entry.
# Symbols the sanitizers add to every object (__odr_asan.*, __asan_*,
# __ubsan_*) are not the plugin's and are ignored.
status=0
for so in "$@"; do
    syms=$(nm -D --defined-only "$so" | awk '$2 != "U" && $2 != "w" && $2 != "v" {print $3}' | grep -v '^_\(init\|fini\|edata\|end\|_bss_start\)$' | grep -v '^__\(odr_asan\|asan_\|ubsan_\)' | sort -u)
    if [ "$syms" != "cw_na_plugin_entry" ]; then
        echo "not ok - $so exports: $(echo $syms | tr '\n' ' ')"
        status=1
    else
        echo "ok - $so exports only cw_na_plugin_entry"
    fi
done
exit $status
