#!/bin/bash
# What `meson install` puts on a bridge node works from there: the files
# are where the unit and the docs say, the installed causewayd runs the
# two-fabric demo with the installed library and plugins (a DESTDIR tree),
# the example configuration passes --check and is installed as a sample
# that never replaces the operator's file, and the systemd units (plain and
# template) check the file before starting and reloading, run as their own
# user, reload by SIGHUP and stop by SIGTERM within a time above the
# default drain grace.
#   install.sh MESON BUILD_ROOT PREFIX LIBDIR BINDIR SYSCONFDIR CAUSEWAYD EXAMPLE
set -u
MESON=$1 BUILD=$2 PREFIX=$3 LIBDIR=$4 BINDIR=$5 SYSCONFDIR=$6 CAUSEWAYD=$7 EXAMPLE=$8
T=$(mktemp -d /tmp/cw-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
pass() { echo "ok - $*"; }

"$CAUSEWAYD" --check -c "$EXAMPLE" >"$T/check.out" 2>&1 ||
    fail "example configuration: $(cat "$T/check.out")"
pass "example configuration valid: $(cat "$T/check.out")"

"$MESON" install -C "$BUILD" --no-rebuild --destdir "$T/root" >"$T/install.log" 2>&1 ||
    fail "meson install: $(tail -n 20 "$T/install.log")"
R=$T/root$PREFIX
case $LIBDIR in /*) L=$T/root$LIBDIR ;; *) L=$R/$LIBDIR ;; esac
case $BINDIR in /*) B=$T/root$BINDIR ;; *) B=$R/$BINDIR ;; esac
case $SYSCONFDIR in /*) E=$T/root$SYSCONFDIR ;; *) E=$R/$SYSCONFDIR ;; esac
case $SYSCONFDIR in /*) CONF=$SYSCONFDIR/causeway ;; *) CONF=$PREFIX/$SYSCONFDIR/causeway ;; esac
for f in "$B/causewayd" "$B/cwctl" "$B/cw-ping" "$B/cw-info" "$B/cw-perf" \
    "$L/libcauseway.so.0" "$L/libcauseway-routes.so.0" "$L/causeway/cw-na-shm.so" \
    "$L/pkgconfig/causeway.pc" "$L/pkgconfig/causeway-routes.pc" \
    "$R/include/causeway/causeway.h" "$R/lib/systemd/system/causewayd.service" \
    "$R/lib/systemd/system/causewayd@.service" "$R/lib/sysusers.d/causeway.conf" \
    "$E/causeway/causewayd.yaml.sample" "$E/causeway/causewayd.yaml" \
    "$R/share/doc/causeway/gateway.md"; do
    [ -e "$f" ] || fail "not installed: ${f#"$T/root"}"
done
pass "installed: programs, libraries, plugins ($(cd "$L/causeway" && echo *.so)), headers, pkg-config, units, sysusers, sample configuration, docs"

# Man pages, where scdoc built them.
if [ -f "$BUILD/docs/man/causewayd.8" ]; then
    for p in man8/causewayd.8 man1/cwctl.1 man1/cw-perf.1 man1/cw-info.1 \
        man1/cw-ping.1 man5/causeway.yaml.5; do
        [ -s "$R/share/man/$p" ] || fail "man page not installed: $p"
    done
    pass "man pages installed: causewayd(8), cwctl(1), cw-perf(1), cw-info(1), cw-ping(1), causeway.yaml(5)"
fi

# One configuration path: the units read it, the sample names it.
cmp -s "$E/causeway/causewayd.yaml.sample" "$EXAMPLE" &&
    cmp -s "$E/causeway/causewayd.yaml" "$EXAMPLE" ||
    fail "installed configuration differs from the sample $EXAMPLE"
grep -q -- "--check --probe -c $CONF/causewayd.yaml\$" "$EXAMPLE" ||
    fail "the sample does not name $CONF/causewayd.yaml"
grep -qx "Environment=CAUSEWAY_CONFIG=$CONF/causewayd.yaml" "$R/lib/systemd/system/causewayd.service" &&
    grep -qx "Environment=CAUSEWAY_CONFIG=$CONF/%i.yaml" "$R/lib/systemd/system/causewayd@.service" ||
    fail "units: $(grep -h CAUSEWAY_CONFIG= "$R"/lib/systemd/system/causewayd*.service)"
pass "one configuration path: $CONF/causewayd.yaml (causewayd@NAME: $CONF/NAME.yaml)"

# A second install keeps the operator's file and refreshes the sample.
echo "# edited by the operator" >>"$E/causeway/causewayd.yaml"
cp "$E/causeway/causewayd.yaml" "$T/edited.yaml"
"$MESON" install -C "$BUILD" --no-rebuild --destdir "$T/root" >"$T/install2.log" 2>&1 ||
    fail "second meson install: $(tail -n 20 "$T/install2.log")"
cmp -s "$E/causeway/causewayd.yaml" "$T/edited.yaml" ||
    fail "a second meson install replaced the operator's configuration"
pass "a second meson install keeps the edited configuration"

# The installed programs on the installed library and plugins only (the
# build tree's plugin directories are compiled in, after the path).
env LD_LIBRARY_PATH="$L" CAUSEWAY_PLUGIN_PATH="$L/causeway" \
    timeout 60 "$B/causewayd" --demo >"$T/demo.out" 2>&1 ||
    fail "installed causewayd --demo: $(tail -n 20 "$T/demo.out")"
grep -q "demo OK: 0 failures" "$T/demo.out" || fail "demo: $(tail -n 5 "$T/demo.out")"
env LD_LIBRARY_PATH="$L" ldd "$B/causewayd" >"$T/ldd.out"
grep -q "libcauseway.so.0 => $L/" "$T/ldd.out" &&
    grep -q "libcauseway-routes.so.0 => $L/" "$T/ldd.out" ||
    fail "installed causewayd does not use the installed libraries: $(cat "$T/ldd.out")"
pass "installed causewayd --demo: $(grep 'demo OK' "$T/demo.out")"
readelf -d "$B/causewayd" | grep -q "R.*PATH.*\[$PREFIX/" ||
    fail "installed causewayd has no run path to $PREFIX"
pass "installed programs carry a run path to the installed library"

U=$R/lib/systemd/system/causewayd.service
grep -qx "ExecStartPre=$PREFIX/${BINDIR#"$PREFIX"/}/causewayd --check --probe -c \${CAUSEWAY_CONFIG}" "$U" &&
    grep -qx "ExecReload=$PREFIX/${BINDIR#"$PREFIX"/}/causewayd --check -c \${CAUSEWAY_CONFIG}" "$U" &&
    grep -qx 'User=causeway' "$U" &&
    grep -qx "ExecStart=$PREFIX/${BINDIR#"$PREFIX"/}/causewayd -c \${CAUSEWAY_CONFIG}" "$U" &&
    grep -qx 'ExecReload=/bin/kill -HUP $MAINPID' "$U" &&
    grep -qx 'KillSignal=SIGTERM' "$U" &&
    grep -qx 'Type=notify' "$U" && grep -qx 'NotifyAccess=main' "$U" ||
    fail "unit: $(grep -E '^Exec|^Kill|^Type|^Notify' "$U")"
stop=$(sed -n 's/^TimeoutStopSec=\([0-9]*\)s$/\1/p' "$U")
grace=$("$CAUSEWAYD" --dump -c "$EXAMPLE" | sed -n 's/^ *drain_grace: \([0-9]*\)s$/\1/p')
[ -n "$stop" ] && [ -n "$grace" ] && [ "$stop" -gt "$grace" ] ||
    fail "unit stop timeout ${stop:-?} s not above the drain grace ${grace:-?} s"
pass "unit: Type=notify (main process), checks (and probes) before start, checks before reload, runs as causeway, SIGHUP reload, SIGTERM drain in ${stop} s > ${grace} s grace"
if command -v systemd-analyze >/dev/null; then
    # verify wants the programs it names to exist: point it at the tree;
    # Without scdoc no page was built: verify the rest.
    noman=
    [ -f "$BUILD/docs/man/causewayd.8" ] || noman='s#man:[^ ]* *##g'
    sed -e "s#$PREFIX/#$R/#g" -e "$noman" "$U" >"$T/causewayd.service"
    sed -e "s#$PREFIX/#$R/#g" -e "$noman" "$R/lib/systemd/system/causewayd@.service" \
        >"$T/causewayd@check.service"
    # and its man: pages to be found by man(1): the installed ones.
    MANPATH=$R/share/man systemd-analyze verify "$T/causewayd.service" \
        "$T/causewayd@check.service" >"$T/verify.out" 2>&1 ||
        fail "systemd-analyze verify: $(cat "$T/verify.out")"
    pass "systemd-analyze verify: no complaint about either unit"
else
    # Everything else was checked; the test says SKIP, not OK.
    echo "SKIP: systemd-analyze not installed: the unit's syntax is not verified"
    exit 77
fi
