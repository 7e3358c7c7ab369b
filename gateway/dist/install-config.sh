#!/bin/sh
# meson install: the sample configuration becomes the configuration only
# where there is none yet; a file the operator wrote is never replaced.
#   install-config.sh CONFIG   (CONFIG.sample is already installed)
set -eu
conf="${DESTDIR:-}$1"
if [ -e "$conf" ]; then
    echo "causeway: keeping $1 (the new sample is $1.sample)"
else
    cp -p "$conf.sample" "$conf"
    echo "causeway: installed $1 from $1.sample: edit it, then causewayd --check --probe -c $1"
fi
