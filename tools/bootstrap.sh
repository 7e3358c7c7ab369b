#!/bin/sh
# Causeway bootstrap for a fresh Debian 12 machine (run as root).
#
#   tools/bootstrap.sh demo   install, build, run the main job (gateway demo)
#   tools/bootstrap.sh test   install, build with ASan/UBSan, run every test
#
# Idempotent: installs only what is missing and reuses an existing build.
set -eu

mode=${1:-demo}
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"

packages="meson ninja-build pkg-config gcc libc6-dev binutils python3 \
libfabric-dev libfabric-bin libucx-dev ucx-utils libibverbs-dev \
librdmacm-dev ibverbs-utils libyaml-dev libcmocka-dev iproute2 procps time \
scdoc gnuplot-nox clang-format"

missing=""
for p in $packages; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed"; then
        missing="$missing $p"
    fi
done
if [ -n "$missing" ]; then
    echo "bootstrap: installing:$missing"
    if [ "$(id -u)" -ne 0 ]; then
        echo "bootstrap: run as root (or install:$missing)" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -q
    apt-get install -y -q --no-install-recommends $missing
fi

setup() {
    dir=$1
    shift
    if [ -f "$dir/build.ninja" ]; then
        meson setup --reconfigure "$dir" "$@" >/dev/null
    else
        meson setup "$dir" "$@"
    fi
    ninja -C "$dir"
}

case "$mode" in
demo)
    setup build
    if [ -x build/gateway/causewayd ] && build/gateway/causewayd --help 2>/dev/null | grep -q -- '--demo'; then
        exec build/gateway/causewayd --demo
    fi
    exec build/tools/cw-demo
    ;;
test)
    # Every plugin's dependency required: a missing -dev package fails the
    # build here instead of dropping that plugin's tests (the demo stays
    # auto).
    setup build-test -Dsanitize=true -Dwerror_ci=true -Dtests=enabled \
        -Dofi=enabled -Ducx=enabled -Dverbs=enabled -Dman=enabled
    exec meson test -C build-test --print-errorlogs --num-processes 2 \
        --timeout-multiplier 3
    ;;
*)
    echo "usage: $0 demo|test" >&2
    exit 2
    ;;
esac
