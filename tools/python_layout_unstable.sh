#!/usr/bin/env bash
# Prints the layouts CPython's own headers give for Debian unstable's
# Python releases (tools/python_layout.sh --one on libpython3.X-dev's
# include/python3.X), to check the _Py_DebugOffsets shapes of
# agent/runtimes/python/py_layout.c and tests/unit/py_layout_headers.h
# against them. Downloads the -dev packages through apt with a private
# state directory (the host's apt lists and sources are not touched);
# needs Debian's mirror, nothing else.
#
#   tools/python_layout_unstable.sh 3.14 3.15
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
[ $# -gt 0 ] || { echo "usage: $0 3.X..." >&2; exit 2; }
for v in "$@"; do
    [[ $v =~ ^3\.[0-9]+$ ]] || { echo "$0: not a Python version: $v" >&2; exit 2; }
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/etc/parts" "$tmp/state/lists/partial" "$tmp/cache/archives/partial" "$tmp/debs"
echo "deb http://deb.debian.org/debian unstable main" >"$tmp/etc/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$tmp/etc/sources.list" -o "Dir::Etc::SourceParts=$tmp/etc/parts"
    -o "Dir::State=$tmp/state" -o "Dir::Cache=$tmp/cache" -o "Acquire::Check-Valid-Until=false"
    -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" -qq update
for v in "$@"; do
    (cd "$tmp/debs" && apt-get "${apt_opts[@]}" -qq download "libpython$v-dev")
done
for d in "$tmp"/debs/*.deb; do
    dpkg-deb -x "$d" "$tmp/root"
    echo "# $(basename "$d")"
done
for v in "$@"; do
    echo "# python$v: $(sed -n 's/^#define PY_VERSION  *"\(.*\)"$/\1/p' "$tmp/root/usr/include/python$v/patchlevel.h")"
    # Debian's pyconfig.h includes <x86_64-linux-gnu/python3.X/pyconfig.h>.
    CPATH="$tmp/root/usr/include" "$here/python_layout.sh" --one "$tmp/root/usr/include/python$v"
done
