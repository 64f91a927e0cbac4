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
    golang-go g++ python3 linux-perf bpftrace
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

missing=()
for p in "${pkgs[@]}"; do
    st=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
    [ "$st" = installed ] || missing+=("$p")
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
apt-get update -qq >/dev/null
# No service is started by a package's install (docker.io's would start a
# dockerd with a bridge and iptables rules); make test-install starts its own.
policy=/usr/sbin/policy-rc.d
made_policy=0
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' >"$policy" && chmod 0755 "$policy" && made_policy=1
fi
rc=0
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null || rc=$?
[ "$made_policy" = 0 ] || rm -f "$policy"
exit "$rc"
