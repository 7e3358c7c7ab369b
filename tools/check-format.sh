#!/bin/sh
# The C sources as .clang-format lays them out: clang-format --dry-run over
# every tracked .c and .h; prints each file that differs and fails if any.
#   tools/check-format.sh        check (the 'format' test runs this)
#   tools/check-format.sh -i     rewrite the files in place
# Exits 77 (a skip) only when clang-format is not installed, or the tree is
# not a git checkout (a release tarball has no file list to check).
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
fmt=${CLANG_FORMAT:-clang-format}
if ! command -v "$fmt" >/dev/null 2>&1; then
    echo "SKIP: $fmt is not installed (tools/bootstrap.sh installs it)"
    exit 77
fi
if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    echo "SKIP: $top is not a git checkout"
    exit 77
fi
if [ "${1:-}" = "-i" ]; then
    git ls-files -z '*.c' '*.h' | xargs -0 "$fmt" -i
    exit $?
fi
bad=0
for f in $(git ls-files '*.c' '*.h'); do
    if ! "$fmt" --dry-run --Werror "$f" >/dev/null 2>&1; then
        echo "not formatted: $f (tools/check-format.sh -i)"
        bad=$((bad + 1))
    fi
done
n=$(git ls-files '*.c' '*.h' | wc -l)
if [ "$bad" -ne 0 ]; then
    echo "FAIL: $bad of $n files differ from .clang-format"
    exit 1
fi
echo "ok: $n files as .clang-format lays them out ($("$fmt" --version))"
