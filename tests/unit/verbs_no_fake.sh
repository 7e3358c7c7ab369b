#!/bin/sh
# The shipped verbs plugin holds the rdma-core path only: none of the fake
# device's code (fake_*.c, the separate test-only cw-verbs-fake.so) is in
# it, and the fake module is only reachable by dlopen of a path named in
# CAUSEWAY_VERBS_FAKE.  Checked on the full symbol table (nm) of the
# plugin, with the fake module itself as the control that the pattern
# finds the fake's symbols where they are.
#
#   verbs_no_fake.sh PLUGIN.so FAKE-MODULE.so
set -u
plugin=$1
fake=$2
if ! command -v nm >/dev/null 2>&1; then
    echo "SKIP: nm (binutils) is not installed"
    exit 77
fi
pattern='fake'
status=0

all=$(nm "$plugin" 2>&1)
if [ -z "$all" ] || echo "$all" | grep -q 'no symbols'; then
    echo "not ok - $plugin has no symbol table (stripped?): cannot check"
    exit 1
fi
hits=$(echo "$all" | awk '{print $NF}' | grep -i "$pattern" | sort -u)
if [ -n "$hits" ]; then
    echo "not ok - $plugin contains fake-device symbols: $(echo $hits | tr '\n' ' ')"
    status=1
else
    echo "ok - $plugin: no symbol matching '$pattern' among $(echo "$all" | wc -l) symbols"
fi
dyn=$(nm -D "$plugin" | awk '{print $NF}' | grep -i "$pattern")
if [ -n "$dyn" ]; then
    echo "not ok - $plugin dynamic symbols mention the fake: $dyn"
    status=1
else
    echo "ok - $plugin: no dynamic symbol matching '$pattern'"
fi

ctl=$(nm "$fake" | awk '{print $NF}' | grep -c '^fake_')
if [ "$ctl" -lt 10 ]; then
    echo "not ok - control: $fake shows only $ctl fake_* symbols"
    status=1
else
    echo "ok - control: $fake has $ctl fake_* symbols"
fi
if nm -D --defined-only "$fake" | awk '{print $NF}' | grep -qx 'vb_fake_module_entry'; then
    echo "ok - $fake exports vb_fake_module_entry"
else
    echo "not ok - $fake does not export vb_fake_module_entry"
    status=1
fi
exit $status
