#!/usr/bin/env bash
# Builds the Debian packages of the agent and of the server (and their
# -dbgsym packages) from binaries already built: `make deb` for amd64 from
# build/, `make ARCH=arm64 deb` for arm64 from build-arm64/. See --help.
#
# The packages hold the same unit files (deploy/systemd/) and config files
# (deploy/config/) that deploy/install.sh installs; only the paths of
# /usr/local differ (rewritten here, and checked that none is left).
set -euo pipefail

prog=tools/deb/build.sh
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)

usage() {
    cat <<EOF
Usage: $prog --build-dir DIR --arch amd64|arm64 --version VERSION --out DIR [--no-lintian]

Writes OUT/codexray-node-agent_V_ARCH.deb, OUT/codexray-server_V_ARCH.deb and
their -dbgsym packages from DIR/codexray-node-agent and DIR/codexray-server
(built for ARCH: checked). VERSION is the build's (git describe), made a
Debian version: a tag v1.2-3-gabc -> 1.2+git3.gabc, no tag -> 0~gitN.gHASH
(N commits: HASH and its history), -dirty -> +dirty. Depends come from dpkg-shlibdeps (the
libraries' own shlibs/symbols files; ARCH's libraries must be installed,
multiarch, for a cross build). Then lintian checks them where it is
installed (tools/deb/lintian-overrides say what it may find and why).
EOF
}

die() {
    echo "$prog: $*" >&2
    exit 1
}

build_dir="" arch="" version="" out="" lintian=1
while [ $# -gt 0 ]; do
    case "$1" in
    --build-dir) build_dir=${2:-}; shift 2 || die "--build-dir needs a value" ;;
    --arch) arch=${2:-}; shift 2 || die "--arch needs a value" ;;
    --version) version=${2:-}; shift 2 || die "--version needs a value" ;;
    --out) out=${2:-}; shift 2 || die "--out needs a value" ;;
    --no-lintian) lintian=0; shift ;;
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
    esac
done
if [ -z "$build_dir" ] || [ -z "$arch" ] || [ -z "$version" ] || [ -z "$out" ]; then
    die "--build-dir, --arch, --version and --out are required (see --help)"
fi

# The ELF machine readelf names for each architecture we package.
case "$arch" in
amd64) machine="Advanced Micro Devices X86-64" ;;
arm64) machine="AArch64" ;;
*) die "--arch must be amd64 or arm64, not '$arch'" ;;
esac
gnu_type=$(dpkg-architecture -a"$arch" -qDEB_HOST_GNU_TYPE 2>/dev/null)
# The binutils of that architecture strip (x86_64-linux-gnu-strip is in
# every Debian amd64 binutils; aarch64-linux-gnu-* comes with the cross
# compiler); readelf reads any.
for t in objcopy strip; do
    command -v "$gnu_type-$t" >/dev/null ||
        die "$gnu_type-$t is missing (binutils for $arch: apt-get install binutils-${gnu_type//_/-})"
done

# A Debian version from git describe's (the binaries' --version).
deb_version() {
    local v=$1 dirty="" n
    case "$v" in *-dirty) dirty=+dirty; v=${v%-dirty} ;; esac
    if [[ $v =~ ^v?([0-9][0-9A-Za-z.+~]*)-([0-9]+)-g([0-9a-f]+)$ ]]; then
        echo "${BASH_REMATCH[1]}+git${BASH_REMATCH[2]}.g${BASH_REMATCH[3]}$dirty"
    elif git -C "$repo" rev-parse -q --verify "refs/tags/$v" >/dev/null &&
        [[ $v =~ ^v?([0-9][0-9A-Za-z.+~]*)$ ]]; then
        echo "${BASH_REMATCH[1]}$dirty"
    elif [[ $v =~ ^[0-9a-f]{7,40}$ ]] &&
        n=$(git -C "$repo" rev-list --count "$v" 2>/dev/null); then
        # No tag: the number of commits orders the builds of one history.
        echo "0~git$n.g$v$dirty"
    else
        die "version '$1' is none of git describe's TAG-N-gHASH, TAG (a tag here, starting with a digit) or HASH (a commit here)"
    fi
}
deb_ver=$(deb_version "$version")

# Reproducible: file times and the changelog's date are the commit's.
SOURCE_DATE_EPOCH=$(git -C "$repo" log -1 --format=%ct 2>/dev/null || date +%s)
export SOURCE_DATE_EPOCH
maintainer="CodeXray maintainers <maintainers@users.noreply.a-seed-55765800.example>"

umask 022
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/debian" "$out"

# Package NAME: its binary, unit, config file, data directories, section
# and description.
pkg_fields() {
    case "$1" in
    codexray-node-agent)
        bin=codexray-node-agent unit=codexray-node-agent.service conf=agent.conf
        data_dirs="/var/lib/codexray-agent" section=admin
        summary="continuous eBPF CPU profiler: the node agent"
        long="The CodeXray node agent samples every process on this host with eBPF
(CFI unwinding in BPF, frames named on the host: C, C++, Rust, Go, Java
JIT, Python) and ships one pprof per process per minute to
codexray-server. Its unit runs it as root with only the capabilities it
uses; its settings are in /etc/codexray/agent.conf (endpoint: the
server's URL), its spool in /var/lib/codexray-agent." ;;
    codexray-server)
        bin=codexray-server unit=codexray-server.service conf=server.conf
        data_dirs="/var/lib/codexray-server /var/lib/private/codexray-server" section=admin
        summary="continuous eBPF CPU profiler: the profile store and web UI"
        long="The CodeXray server takes the node agents' profiles over HTTP, stores
them in SQLite under /var/lib/codexray-server and serves queries, flame
graphs and its web UI. Its unit runs it as an unprivileged dynamic user;
its settings are in /etc/codexray/server.conf (listen, api_key)." ;;
    esac
}

# Description: a summary line, then the long text indented by one space.
description() {
    echo "Description: $1"
    local line
    while IFS= read -r line; do echo " $line"; done <<<"$2"
}

# The debian/control dpkg-shlibdeps reads (it wants one; only the package
# names matter to it).
printf 'Source: codexray\nMaintainer: %s\n\nPackage: codexray-node-agent\nArchitecture: any\n\nPackage: codexray-server\nArchitecture: any\n' \
    "$maintainer" >"$work/debian/control"

build_pkg() {
    local pkg=$1 bin unit conf data_dirs section summary long
    pkg_fields "$pkg"
    local src="$build_dir/$bin" root="$work/debian/$pkg" dbg="$work/debian/$pkg-dbgsym"
    local doc="$root/usr/share/doc/$pkg" f id deps size

    [ -f "$src" ] || die "$src is missing: build it first (make)"
    local hdr
    hdr=$(readelf -h "$src" 2>/dev/null) || hdr=""
    grep -q "Machine: *$machine\$" <<<"$hdr" ||
        die "$src is not an $arch binary ($machine): build it for $arch (make ARCH=$arch)"
    # The version is compiled in (CODEXRAY_VERSION): the package must not
    # claim another. Objects built before the last commit keep the old one.
    grep -qaF -- "$version" "$src" ||
        die "$src was not built as version $version (its --version says which): rebuild it (make clean; make), or package it as that (make deb VERSION=THAT)"

    # The binary, stripped as dh_strip does; its debug information in the
    # -dbgsym package under its build id.
    install -D -m 0755 "$src" "$root/usr/bin/$bin"
    id=$(readelf -n "$src" | sed -n 's/^ *Build ID: *\([0-9a-f]*\)$/\1/p')
    [ ${#id} -ge 8 ] || die "$src has no build id (linked without --build-id)"
    mkdir -p "$dbg/usr/lib/debug/.build-id/${id:0:2}"
    f="usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug"
    "$gnu_type-objcopy" --only-keep-debug --compress-debug-sections "$src" "$dbg/$f"
    chmod 0644 "$dbg/$f"
    "$gnu_type-strip" --remove-section=.comment --remove-section=.note --strip-unneeded \
        "$root/usr/bin/$bin"
    "$gnu_type-objcopy" --add-gnu-debuglink="$dbg/$f" "$root/usr/bin/$bin"

    # The unit install.sh installs, with the packages' paths.
    mkdir -p "$root/lib/systemd/system"
    sed -e "s#/usr/local/bin/#/usr/bin/#g" \
        -e "s#file:///usr/local/share/doc/codexray/README.md#file:///usr/share/doc/$pkg/README.md.gz#g" \
        "$repo/deploy/systemd/$unit" >"$root/lib/systemd/system/$unit"
    ! grep -n /usr/local "$root/lib/systemd/system/$unit" ||
        die "deploy/systemd/$unit names a /usr/local path this script does not rewrite"
    # Its config file as it is: install.sh fills in the same file.
    install -D -m 0600 "$repo/deploy/config/$conf" "$root/etc/codexray/$conf"

    mkdir -p "$doc"
    gzip -9n <"$repo/README.md" >"$doc/README.md.gz"
    sed "s/@PACKAGE@/$pkg/g" "$repo/tools/deb/copyright" >"$doc/copyright"
    {
        echo "$pkg ($deb_ver) unstable; urgency=medium"
        echo
        echo "  * Built from git $version by tools/deb/build.sh."
        echo
        echo " -- $maintainer  $(date -R -u -d "@$SOURCE_DATE_EPOCH")"
    } | gzip -9n >"$doc/changelog.gz"
    mkdir -p "$root/usr/share/lintian/overrides"
    grep "^$pkg: " "$repo/tools/deb/lintian-overrides" >"$root/usr/share/lintian/overrides/$pkg" ||
        rm -r "$root/usr/share/lintian"
    # The -dbgsym package's documentation is its package's, as Debian's are.
    mkdir -p "$dbg/usr/share/doc"
    ln -s "$pkg" "$dbg/usr/share/doc/$pkg-dbgsym"

    # Maintainer scripts: deploy/deb/'s, for this unit and these data.
    mkdir -p "$root/DEBIAN" "$dbg/DEBIAN"
    for f in postinst prerm postrm; do
        sed -e "s#@PACKAGE@#$pkg#g" -e "s#@UNIT@#$unit#g" -e "s#@DATA_DIRS@#$data_dirs#g" \
            "$repo/deploy/deb/$f" >"$root/DEBIAN/$f"
        ! grep -n '@[A-Z_]*@' "$root/DEBIAN/$f" || die "deploy/deb/$f: a placeholder is left"
        chmod 0755 "$root/DEBIAN/$f"
    done
    echo "/etc/codexray/$conf" >"$root/DEBIAN/conffiles"

    # Depends: the packages of the libraries the binary loads, with the
    # versions their shlibs/symbols files ask for.
    deps=$(cd "$work" && eval "$(dpkg-architecture -a"$arch" -s 2>/dev/null)" &&
        dpkg-shlibdeps -O -e"debian/$pkg/usr/bin/$bin" 2>"$work/shlibdeps.err" |
        sed -n 's/^shlibs:Depends=//p') ||
        die "dpkg-shlibdeps on $bin failed (for $arch, are its :$arch libraries installed?): $(cat "$work/shlibdeps.err")"
    [ -n "$deps" ] || die "dpkg-shlibdeps found no dependency of $bin: $(cat "$work/shlibdeps.err")"

    (cd "$root" && find . -type f ! -path './DEBIAN/*' ! -path "./etc/*" | LC_ALL=C sort |
        sed 's#^\./##' | xargs md5sum) >"$root/DEBIAN/md5sums"
    size=$(du -k -s --exclude=DEBIAN "$root" | cut -f1)
    {
        echo "Package: $pkg"
        echo "Source: codexray"
        echo "Version: $deb_ver"
        echo "Architecture: $arch"
        echo "Maintainer: $maintainer"
        echo "Installed-Size: $size"
        echo "Depends: $deps"
        echo "Section: $section"
        echo "Priority: optional"
        description "$summary" "$long"
    } >"$root/DEBIAN/control"

    (cd "$dbg" && find . -type f ! -path './DEBIAN/*' | LC_ALL=C sort | sed 's#^\./##' |
        xargs md5sum) >"$dbg/DEBIAN/md5sums"
    size=$(du -k -s --exclude=DEBIAN "$dbg" | cut -f1)
    {
        echo "Package: $pkg-dbgsym"
        echo "Source: codexray"
        echo "Version: $deb_ver"
        echo "Architecture: $arch"
        echo "Maintainer: $maintainer"
        echo "Installed-Size: $size"
        echo "Depends: $pkg (= $deb_ver)"
        echo "Section: debug"
        echo "Priority: optional"
        echo "Description: debug symbols for $pkg"
        echo "Auto-Built-Package: debug-symbols"
        echo "Build-Ids: $id"
    } >"$dbg/DEBIAN/control"

    for f in "$root" "$dbg"; do
        dpkg-deb --root-owner-group -Zxz --build "$f" \
            "$work/out/$(basename "$f")_${deb_ver}_$arch.deb" >/dev/null
    done
}

# All four made before any reaches OUT, where they replace this arch's.
mkdir -p "$work/out"
for pkg in codexray-node-agent codexray-server; do
    build_pkg "$pkg"
done
debs=()
for d in "$work/out"/*.deb; do
    [ -n "$(dpkg-deb --field "$d" Package)" ] || die "$d: not a package dpkg-deb can read"
    name=$(basename "$d")
    rm -f "$out/${name%%_*}_"*"_$arch.deb"
    mv "$d" "$out/$name"
    debs+=("$out/$name")
done
printf '%s\n' "${debs[@]}"

if [ "$lintian" = 1 ]; then
    if command -v lintian >/dev/null; then
        # Errors and warnings fail the build; the rest is shown. Not as root
        # (lintian unpacks what it checks): as nobody where we are root.
        # (Unless nobody cannot read them: a directory of root's only.)
        run_as=()
        if [ "$(id -u)" = 0 ]; then
            run_as=(setpriv --reuid=nobody --regid=nogroup --clear-groups env HOME=/tmp)
            "${run_as[@]}" test -r "${debs[0]}" || run_as=()
        fi
        "${run_as[@]}" lintian --fail-on error,warning "${debs[@]}"
    else
        echo "$prog: lintian is not installed: packages not checked (apt-get install lintian)" >&2
    fi
fi
