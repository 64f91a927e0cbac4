#!/usr/bin/env python3
"""Extracts the kernel's own BTF (.BTF, what /sys/kernel/btf/vmlinux shows on
a running kernel) from an arm64 kernel image, for a cross build's vmlinux.h:

    tools/kernels/vmlinux_btf.py VMLINUZ OUT

VMLINUZ is Debian's /boot/vmlinuz-*-arm64: a raw arm64 Image (bookworm), a
gzip'd one, or an EFI zboot image (a PE file whose payload is the gzip'd or
zstd'd Image). The Image keeps .BTF as is, so the blob is found by its header:
magic 0xEB9F, version 1, hdr_len 24, then the type and string sections; its
size is hdr_len + the end of the later section. More than one candidate (the
magic bytes inside other data) is settled by taking the largest that parses.
OUT is written whole or not at all; bpftool validates it afterwards
(tools/kernels/btf.sh).
"""
import gzip
import io
import os
import struct
import subprocess
import sys
import zlib

ARM64_MAGIC_OFF = 0x38  # struct arm64_image_header's magic, "ARM\x64"
MAX_IMAGE = 1 << 30  # a decompressed kernel is far smaller; a cap on hostile input
MAX_BTF = 256 << 20


def die(msg):
    print(f"vmlinux_btf: {msg}", file=sys.stderr)
    sys.exit(1)


def decompress(data, what):
    """The Image inside a gzip or zboot file, or data itself."""
    if data[:2] == b"\x1f\x8b":
        try:
            out = gzip.GzipFile(fileobj=io.BytesIO(data)).read(MAX_IMAGE + 1)
        except (OSError, EOFError, zlib.error) as e:
            die(f"{what}: bad gzip data: {e}")
        if len(out) > MAX_IMAGE:
            die(f"{what}: decompresses to more than {MAX_IMAGE} bytes")
        return out
    if data[:2] == b"MZ" and data[4:8] == b"zimg":
        # struct linux_efi_zboot_header: payload offset and size at 8 and 12,
        # the compression's name at 24.
        if len(data) < 56:
            die(f"{what}: zboot header cut short")
        off, size = struct.unpack_from("<II", data, 8)
        comp = data[24:56].split(b"\0", 1)[0].decode("ascii", "replace")
        if off + size > len(data):
            die(f"{what}: zboot payload past the end of the file")
        payload = data[off:off + size]
        if comp == "gzip":
            return decompress(payload, what)
        if comp == "zstd":
            p = subprocess.run(["zstd", "-dc"], input=payload, capture_output=True, check=False)
            if p.returncode != 0 or len(p.stdout) > MAX_IMAGE:
                die(f"{what}: cannot unzstd the zboot payload")
            return p.stdout
        die(f"{what}: zboot payload compressed with '{comp}', not gzip or zstd")
    return data


def btf_at(img, i):
    """The size of a BTF blob starting at i, or 0 when it does not parse."""
    if i + 24 > len(img):
        return 0
    magic, ver, flags, hdr_len, t_off, t_len, s_off, s_len = struct.unpack_from("<HBBIIIII", img, i)
    if magic != 0xEB9F or ver != 1 or flags != 0 or hdr_len != 24:
        return 0
    end = max(t_off + t_len, s_off + s_len)
    if t_len == 0 or s_len == 0 or end > MAX_BTF or i + hdr_len + end > len(img):
        return 0
    strs = i + hdr_len + s_off
    # The string section starts with the empty string and ends with a NUL.
    if img[strs] != 0 or img[strs + s_len - 1] != 0:
        return 0
    return hdr_len + end


def main():
    if len(sys.argv) != 3:
        die("usage: vmlinux_btf.py VMLINUZ OUT")
    src, out = sys.argv[1], sys.argv[2]
    try:
        with open(src, "rb") as f:
            data = f.read(MAX_IMAGE + 1)
    except OSError as e:
        die(f"{src}: {e.strerror}")
    if len(data) > MAX_IMAGE:
        die(f"{src}: more than {MAX_IMAGE} bytes")
    img = decompress(data, src)
    if img[ARM64_MAGIC_OFF:ARM64_MAGIC_OFF + 4] != b"ARM\x64":
        die(f"{src}: not an arm64 kernel Image (no ARM\\x64 magic at 0x38)")
    best, best_size = -1, 0
    i = img.find(b"\x9f\xeb\x01\x00")
    while i >= 0:
        n = btf_at(img, i)
        if n > best_size:
            best, best_size = i, n
        i = img.find(b"\x9f\xeb\x01\x00", i + 1)
    if best < 0:
        die(f"{src}: no BTF in the kernel image (built without CONFIG_DEBUG_INFO_BTF?)")
    tmp = out + ".tmp"
    with open(tmp, "wb") as f:
        f.write(img[best:best + best_size])
    os.replace(tmp, out)
    print(f"vmlinux_btf: {src}: {best_size} bytes of BTF at {best:#x}", file=sys.stderr)


if __name__ == "__main__":
    main()
