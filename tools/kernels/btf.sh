#!/usr/bin/env bash
# The BTF of Debian's newest kernel of a series for another architecture,
# for a cross build's vmlinux.h (make ARCH=arm64):
#
#   tools/kernels/btf.sh CACHE ARCH SERIES       ARCH: arm64; SERIES: 6.1 ...
#
# Prints the path of the raw BTF (what /sys/kernel/btf/vmlinux is on a
# running kernel). The kernel comes through fetch.sh (KERNELS_ARCH=ARCH), in
# the same cache the qemu tests use; its BTF is extracted once
# (vmlinux_btf.py), validated with bpftool and kept beside its vmlinuz, so a
# build works offline once the cache has it (fetch.sh falls back to the
# cached kernel when the mirror cannot be reached).
set -euo pipefail

here=$(dirname "$0")
cache=${1:?usage: btf.sh CACHE ARCH SERIES}
arch=${2:?usage: btf.sh CACHE ARCH SERIES}
series=${3:?usage: btf.sh CACHE ARCH SERIES}
case "$arch" in
    arm64) ;;
    *)
        echo "btf: ARCH=$arch: only arm64 kernels are extracted (vmlinux_btf.py reads arm64 Images)" >&2
        exit 1
        ;;
esac
if ! mkdir -p "$cache" 2>/dev/null || [ ! -w "$cache" ]; then
    echo "btf: cannot write the kernel cache $cache: run as root or set KERNELS_CACHE=DIR" >&2
    exit 1
fi

line=$(KERNELS_ARCH=$arch "$here"/fetch.sh "$cache" "$series" | tail -1)
vmlinuz=${line#* * }
if [ -z "$line" ] || [ ! -f "$vmlinuz" ]; then
    echo "btf: fetch.sh gave no $arch $series kernel" >&2
    exit 1
fi
out=$(dirname "$vmlinuz")/vmlinux.btf
if [ ! -s "$out" ]; then
    python3 "$here"/vmlinux_btf.py "$vmlinuz" "$out.new"
    if ! bpftool btf dump file "$out.new" format c >/dev/null; then
        rm -f "$out.new"
        echo "btf: bpftool cannot read the BTF extracted from $vmlinuz" >&2
        exit 1
    fi
    mv "$out.new" "$out"
fi
echo "$out"
