#!/usr/bin/env bash
# Installs the Debian packages the build, the tests and the benchmarks need.
# Idempotent and quiet when everything is already there; run by `make deps`,
# and by `make` and `make test` before they do anything else.
set -euo pipefail

pkgs=(
    make gcc clang llvm pkg-config clang-format
    libbpf-dev bpftool libelf-dev libdw-dev libdebuginfod-dev zlib1g-dev libdeflate-dev libzstd-dev libiberty-dev xxd
    libprotobuf-c-dev protobuf-c-compiler
    libcurl4-openssl-dev libmicrohttpd-dev libsqlite3-dev
    libcmocka-dev
    clickhouse-server  # the ClickHouse store's tests: two local servers as a two-shard cluster
    zookeeper  # ClickHouse's distributed DDL (ON CLUSTER) in the ClickHouse tests, run with java
    debuginfod  # the debuginfod tests: Debian's server over a directory of debug files
    golang-go g++ python3 linux-perf bpftrace bpfcc-tools
    shellcheck python3-yaml systemd curl zstd
    chromium nodejs  # the web UI tests: headless Chromium driven by playwright-core
    openjdk-17-jdk-headless  # the Java (perf map) integration test
    rustc  # the CFI tests' Rust workload and fixture (Debian's, at /usr/bin/rustc)
    qemu-system-x86 busybox-static  # make test-kernels: Debian's kernels under qemu, a busybox guest
    # make test-install: the engines, a Debian root made here, a booted machine,
    # the Kubernetes API's models
    docker.io podman runc mmdebstrap systemd-container python3-kubernetes
    dpkg-dev lintian  # make deb: dpkg-shlibdeps for the Depends, lintian to check the packages
)

# make ARCH=arm64 on an x86_64 host: Debian's cross compiler, the arm64 -dev
# package of every library the agent, the server and the unit tests link
# (multiarch: /usr/lib/aarch64-linux-gnu), qemu-user-static to run the unit
# tests (make ARCH=arm64 unit) and qemu-system-arm for make test-arm64. A
# native arm64 host builds with the packages above.
cross=()
if [ "$(dpkg --print-architecture)" = amd64 ]; then
    cross=(
        gcc-aarch64-linux-gnu g++-aarch64-linux-gnu qemu-user-static qemu-system-arm
        libbpf-dev:arm64 libelf-dev:arm64 libdw-dev:arm64 libdebuginfod-dev:arm64
        zlib1g-dev:arm64 libdeflate-dev:arm64 libzstd-dev:arm64 libiberty-dev:arm64
        libprotobuf-c-dev:arm64 libcurl4-openssl-dev:arm64 libmicrohttpd-dev:arm64
        libsqlite3-dev:arm64 libcmocka-dev:arm64
    )
    pkgs+=("${cross[@]}")
fi

# One query for all: "NAME[:ARCH] STATUS" per installed instance. A package
# installed for two architectures (libbpf-dev and libbpf-dev:arm64) is
# listed once for each, qualified with its architecture.
native=$(dpkg --print-architecture)
installed=$(dpkg-query -W -f='${binary:Package} ${db:Status-Status}\n' "${pkgs[@]}" 2>/dev/null |
    sed -n 's/ installed$//p' || true)
missing=()
for p in "${pkgs[@]}"; do
    grep -qxF -e "$p" -e "$p:$native" <<<"$installed" || missing+=("$p")
done
# npm comes with some builds of nodejs (NodeSource's); Debian ships it apart.
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "deps: missing packages: ${missing[*]}; run 'make deps' as root" >&2
    exit 1
fi
echo "deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# The arm64 packages need the architecture in dpkg's list before the update
# that fetches its package lists.
if [ ${#cross[@]} -gt 0 ] && ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
fi
apt-get -o DPkg::Lock::Timeout=600 update -qq >/dev/null
# No service is started by a package's install (docker.io's would start a
# dockerd with a bridge and iptables rules); make test-install starts its own.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && made_policy=1
fi
rc=0
apt-get -o DPkg::Lock::Timeout=600 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
[ "$made_policy" = 0 ] || rm -f "$policy"
exit "$rc"
