#!/usr/bin/env bash
# Fetches Debian's newest kernel of each series with apt, through a private
# apt configuration under the cache folder (the host's apt is not touched),
# and keeps only its vmlinuz:
#
#   tools/kernels/fetch.sh CACHE SERIES...     SERIES: 5.10 6.1 6.12 sid
#   tools/kernels/fetch.sh CACHE --debs SERIES PKG...
#
# KERNELS_ARCH=arm64 (Debian's architecture name; amd64 when unset) fetches
# that architecture's kernels, kept under CACHE/ARCH/ (amd64's directly under
# CACHE). Prints one line per series: "SERIES VERSION PATH/vmlinuz". The newest build
# of the series in its suites (the base suite and its security suite) is
# taken, never a pinned one: the mirror drops old builds. The package lists
# are refreshed when older than KERNELS_REFRESH_MINUTES (60); if the mirror
# cannot be reached, the newest kernel already in the cache is used.
#
# With --debs: the newest build of each PKG (of ARCH) in SERIES's suites,
# unpacked together into one directory (a guest's userland: busybox-static,
# an interpreter); prints "debs DIR". Unpacked again only when a version
# changes. Beside it, each package's own record: DIR/../info/PKG.control (its
# control fields) and DIR/../info/PKG.list (its paths, as dpkg lists them), a
# dpkg database's makings (tools/kernels/initramfs.py --dpkg-db).
set -euo pipefail

cache=${1:?usage: fetch.sh CACHE SERIES... | fetch.sh CACHE --debs SERIES PKG...}
shift
arch=${KERNELS_ARCH:-amd64}
# modules: those the guest loads, in their order, from the kernel's package
# (kept in DIR/modules/, named in DIR/modules.list; one built in is left out):
# arm64's results port is a virtio console on PCI, modules in 6.1.
modules=""
case "$arch" in
    amd64) ;;
    arm64)
        cache=$cache/$arch
        modules="virtio_pci_legacy_dev virtio_pci_modern_dev virtio_pci virtio_console"
        ;;
    *)
        echo "fetch: KERNELS_ARCH=$arch: amd64 or arm64" >&2
        exit 1
        ;;
esac
refresh_min=${KERNELS_REFRESH_MINUTES:-60}
keyring=/usr/share/keyrings/debian-archive-keyring.gpg
# The archives as the host's own apt reaches them (its sources: the same
# mirror or proxy serves the kernels); KERNELS_MIRROR=URL, under which
# debian/ and debian-security/ are, overrides.
host_mirror() {
    local uri
    uri=$({
        sed -n 's/^[[:space:]]*URIs:[[:space:]]*//p' /etc/apt/sources.list.d/*.sources
        sed -n 's/^[[:space:]]*deb[[:space:]]\+\(\[[^]]*\][[:space:]]\+\)\?\([^[:space:]]*\).*/\2/p' \
            /etc/apt/sources.list /etc/apt/sources.list.d/*.list
    } 2>/dev/null | tr ' ' '\n' | grep -m1 '/debian/\?$' || true)
    uri=${uri%/}
    echo "${uri%/debian}"
}
mirror=${KERNELS_MIRROR:-$(host_mirror)}
if [ -z "$mirror" ]; then
    echo "fetch: no Debian archive in the host's apt sources: set KERNELS_MIRROR=URL" >&2
    exit 1
fi

suites_of() {
    case "$1" in
        5.10) echo "debian:bullseye debian-security:bullseye-security" ;;
        6.1) echo "debian:bookworm debian-security:bookworm-security" ;;
        6.12) echo "debian:trixie debian-security:trixie-security" ;;
        sid) echo "debian:sid" ;;
        *) return 1 ;;
    esac
}

# A private apt: its own sources, lists, archives, empty dpkg status, and none
# of the host's configuration parts or preferences.
apt_setup() {
    local series=$1 d=$2 s
    mkdir -p "$d"/lists/partial "$d"/archives/partial "$d"/etc/sources.list.d \
        "$d"/etc/apt.conf.d "$d"/etc/preferences.d "$d"/deb
    touch "$d"/status
    : > "$d"/etc/sources.list.new
    for s in $(suites_of "$series"); do
        # check-valid-until=no: the signature is still checked; a mirror that
        # is a few weeks behind (sid's Release expires after 7 days) is fine
        # for a test.
        echo "deb [signed-by=$keyring check-valid-until=no] $mirror/${s%%:*} ${s#*:} main" \
            >> "$d"/etc/sources.list.new
    done
    mv "$d"/etc/sources.list.new "$d"/etc/sources.list
    cat > "$d"/apt.conf <<EOF
Dir::State "$d";
Dir::State::Lists "$d/lists";
Dir::State::status "$d/status";
Dir::Cache "$d";
Dir::Cache::Archives "$d/archives";
Dir::Etc::SourceList "$d/etc/sources.list";
Dir::Etc::SourceParts "$d/etc/sources.list.d";
Dir::Etc::Parts "$d/etc/apt.conf.d";
Dir::Etc::Preferences "$d/etc/preferences";
Dir::Etc::PreferencesParts "$d/etc/preferences.d";
APT::Architecture "$arch";
APT::Architectures { "$arch"; };
Acquire::Languages "none";
Acquire::GzipIndexes "true";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
APT::Sandbox::User "root";
EOF
}

# The newest cached kernel of a series: "VERSION PATH" or nothing.
newest_cached() {
    local series=$1 best="" v
    for f in "$cache"/kernels/"$series"/*/vmlinuz; do
        [ -f "$f" ] || continue
        v=$(cat "$(dirname "$f")"/version)
        if [ -z "$best" ] || dpkg --compare-versions "$v" gt "${best%% *}"; then
            best="$v $f"
        fi
    done
    echo "$best"
}

fail() {
    echo "fetch: $*" >&2
    return 1
}

# SERIES's private apt, its package lists refreshed when stale; false when
# the update failed (its log in CACHE/apt/SERIES/update.log).
apt_fresh() {
    local series=$1 d="$cache/apt/$1"
    apt_setup "$series" "$d"
    # sources.updated: the sources of the last good update, its time the
    # update's.
    if [ -z "$(find "$d"/sources.updated -mmin -"$refresh_min" 2>/dev/null)" ] \
        || ! cmp -s "$d"/etc/sources.list "$d"/sources.updated; then
        if env APT_CONFIG="$d"/apt.conf apt-get update -qq >"$d"/update.log 2>&1 &&
            ! grep -q '^[EW]:' "$d"/update.log; then
            cp "$d"/etc/sources.list "$d"/sources.updated
            rm -f "$d"/resolved
        else
            return 1
        fi
    fi
}

update_failed() {
    echo "fetch: $1: apt-get update failed ($(grep -m1 '^[EW]:' "$cache/apt/$1"/update.log))$2" >&2
}

fetch_one() {
    local series=$1 d="$cache/apt/$1" apt abi pkg ver dir
    suites_of "$series" >/dev/null || fail "unknown series '$series' (5.10 6.1 6.12 sid)" || return
    apt="env APT_CONFIG=$d/apt.conf"
    if ! apt_fresh "$series"; then
        local c
        c=$(newest_cached "$series")
        if [ -n "$c" ]; then
            update_failed "$series" "; using the cached ${c%% *}"
            echo "$series $c"
            return 0
        fi
        update_failed "$series" ":"
        cat "$d"/update.log >&2
        return 1
    fi
    # Resolved again only after an update (parsing the lists takes seconds).
    if [ ! -s "$d"/resolved ]; then
        # linux-image-ARCH (the metapackage) depends on the newest ABI's image.
        abi=$($apt apt-cache depends "linux-image-$arch" |
            sed -n "s/^ *Depends: linux-image-\(.*-$arch\)\$/\1/p" | head -1)
        [ -n "$abi" ] || fail "$series: linux-image-$arch names no linux-image-*-$arch" || return
        # From trixie's successor on, vmlinuz is in linux-binary-ABI; before,
        # in linux-image-ABI itself.
        pkg=linux-image-$abi
        if $apt apt-cache show "linux-binary-$abi" >/dev/null 2>&1; then
            pkg=linux-binary-$abi
        fi
        ver=$($apt apt-cache policy "$pkg" | sed -n 's/^ *Candidate: //p')
        echo "$abi $pkg $ver" > "$d"/resolved
    fi
    read -r abi pkg ver < "$d"/resolved
    case "$series:$abi" in
        sid:* | "$series:$series".*) ;;
        *) fail "$series: the newest kernel of its suites is $abi, not $series" || return ;;
    esac
    [ -n "$ver" ] || fail "$series: no candidate version of $pkg" || return
    dir="$cache/kernels/$series/${abi}_$ver"
    if { [ ! -f "$dir/vmlinuz" ] || { [ -n "$modules" ] && [ ! -f "$dir/modules.list" ]; }; } &&
        ! download "$series" "$pkg" "$ver" "$abi" "$dir"; then
        local c
        c=$(newest_cached "$series")
        [ -n "$c" ] || return 1
        echo "fetch: $series: using the cached ${c%% *}" >&2
        echo "$series $c"
        return 0
    fi
    echo "$series $ver $dir/vmlinuz"
}

# The $modules found in the unpacked package X into DIR/modules/ (xz
# decompressed: busybox's insmod reads plain ones), their order in
# DIR/modules.list.
keep_modules() {
    local x=$1 dir=$2 m f
    [ -n "$modules" ] || return 0
    rm -rf "$dir/modules" && mkdir -p "$dir/modules" || return
    : > "$dir/modules.list.tmp"
    for m in $modules; do
        f=$(find "$x" -name "$m.ko" -o -name "$m.ko.xz" | head -1)
        [ -n "$f" ] || continue
        case "$f" in
            *.xz) xz -dc "$f" > "$dir/modules/$m.ko" || return ;;
            *) cp "$f" "$dir/modules/$m.ko" || return ;;
        esac
        echo "$m.ko" >> "$dir/modules.list.tmp"
    done
    mv "$dir/modules.list.tmp" "$dir/modules.list"
}

# The package's vmlinuz into DIR; older builds of the series are removed.
download() {
    local series=$1 pkg=$2 ver=$3 abi=$4 dir=$5 tmp f
    local apt="env APT_CONFIG=$cache/apt/$series/apt.conf"
    tmp=$(mktemp -d "$cache/apt/$series/deb/XXXXXX")
    echo "fetch: $series: downloading $pkg $ver" >&2
    if ! (cd "$tmp" && $apt apt-get download -qq "$pkg=$ver" >/dev/null) ||
        ! mkdir -p "$tmp/x" || ! dpkg-deb -x "$tmp"/*.deb "$tmp/x"; then
        rm -rf "$tmp"
        fail "$series: cannot download and unpack $pkg $ver" || return
    fi
    f=$(find "$tmp/x" -type f \( -name 'vmlinuz' -o -name 'vmlinuz-*' \) | head -1)
    if [ -z "$f" ]; then
        rm -rf "$tmp"
        fail "$series: no vmlinuz in $pkg $ver" || return
    fi
    if ! { mkdir -p "$dir" && keep_modules "$tmp/x" "$dir" && cp "$f" "$dir/vmlinuz.tmp" &&
        echo "$ver" > "$dir/version" && echo "$abi" > "$dir/abi" && echo "$pkg" > "$dir/package" &&
        mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"; }; then
        rm -rf "$tmp"
        fail "$series: cannot write $dir" || return
    fi
    rm -rf "$tmp"
    for old in "$cache"/kernels/"$series"/*/; do
        [ "${old%/}" = "$dir" ] || rm -rf "$old"
    done
}

# --debs SERIES PKG...: the packages' newest builds unpacked into
# CACHE/debs/SERIES/root; "debs DIR" on stdout.
fetch_debs() {
    local series=$1 d="$cache/apt/$1" dest="$cache/debs/$1" apt want p v tmp deb
    shift
    suites_of "$series" >/dev/null || fail "unknown series '$series' (5.10 6.1 6.12 sid)" || return
    apt="env APT_CONFIG=$d/apt.conf"
    if ! apt_fresh "$series"; then
        if [ -f "$dest/versions" ]; then
            update_failed "$series" "; using the cached packages"
            echo "debs $dest/root"
            return 0
        fi
        update_failed "$series" ":"
        cat "$d"/update.log >&2
        return 1
    fi
    want=""
    for p in "$@"; do
        v=$($apt apt-cache policy "$p" | sed -n 's/^ *Candidate: //p')
        [ -n "$v" ] && [ "$v" != "(none)" ] || fail "$series: no $arch package $p" || return
        want="$want $p=$v"
    done
    if [ -d "$dest/root" ] && [ -d "$dest/info" ] &&
        [ "$want" = "$(cat "$dest/versions" 2>/dev/null)" ]; then
        echo "debs $dest/root"
        return 0
    fi
    echo "fetch: $series: downloading$want" >&2
    tmp=$(mktemp -d "$d/deb/XXXXXX")
    # shellcheck disable=SC2086 # one word per package
    if ! (cd "$tmp" && $apt apt-get download -qq $want >/dev/null); then
        rm -rf "$tmp"
        fail "$series: cannot download$want" || return
    fi
    mkdir "$tmp/root" "$tmp/info"
    for deb in "$tmp"/*.deb; do
        if ! { p=$(dpkg-deb --field "$deb" Package) && dpkg-deb -x "$deb" "$tmp/root" &&
            dpkg-deb --field "$deb" > "$tmp/info/$p.control" &&
            dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's#^\.##; s#/$##; s#^$#/.#' \
                > "$tmp/info/$p.list"; }; then
            rm -rf "$tmp"
            fail "$series: cannot unpack $deb" || return
        fi
    done
    if ! { rm -rf "$dest" && mkdir -p "$dest" && mv "$tmp/root" "$dest/root" &&
        mv "$tmp/info" "$dest/info" &&
        echo "$want" > "$dest/versions"; }; then
        rm -rf "$tmp"
        fail "cannot write $dest" || return
    fi
    rm -rf "$tmp"
    echo "debs $dest/root"
}

if [ "${1:-}" = --debs ]; then
    shift
    [ $# -ge 2 ] || fail "usage: fetch.sh CACHE --debs SERIES PKG..." || exit 1
    fetch_debs "$@"
    exit
fi
# Each series on its own: one that cannot be had does not stop the others.
rc=0
for s in "$@"; do
    fetch_one "$s" || rc=1
done
exit $rc
