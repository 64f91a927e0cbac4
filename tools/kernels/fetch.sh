#!/usr/bin/env bash
# Fetches Debian's newest kernel of each series with apt, through a private
# apt configuration under the cache folder (the host's apt is not touched),
# and keeps only its vmlinuz:
#
#   tools/kernels/fetch.sh CACHE SERIES...     SERIES: 5.10 6.1 6.12 sid
#
# Prints one line per series: "SERIES VERSION PATH/vmlinuz". The newest build
# of the series in its suites (the base suite and its security suite) is
# taken, never a pinned one: the mirror drops old builds. The package lists
# are refreshed when older than KERNELS_REFRESH_MINUTES (60); if the mirror
# cannot be reached, the newest kernel already in the cache is used.
set -euo pipefail

cache=${1:?usage: fetch.sh CACHE SERIES...}
shift
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
APT::Architecture "amd64";
APT::Architectures { "amd64"; };
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

fetch_one() {
    local series=$1 d="$cache/apt/$1" apt abi pkg ver dir
    suites_of "$series" >/dev/null || fail "unknown series '$series' (5.10 6.1 6.12 sid)" || return
    apt_setup "$series" "$d"
    apt="env APT_CONFIG=$d/apt.conf"
    # sources.updated: the sources of the last good update, its time the
    # update's.
    if [ -z "$(find "$d"/sources.updated -mmin -"$refresh_min" 2>/dev/null)" ] \
        || ! cmp -s "$d"/etc/sources.list "$d"/sources.updated; then
        if $apt apt-get update -qq >"$d"/update.log 2>&1 && ! grep -q '^[EW]:' "$d"/update.log; then
            cp "$d"/etc/sources.list "$d"/sources.updated
            rm -f "$d"/resolved
        else
            local c
            c=$(newest_cached "$series")
            if [ -n "$c" ]; then
                echo "fetch: $series: apt-get update failed" \
                    "($(grep -m1 '^[EW]:' "$d"/update.log)); using the cached ${c%% *}" >&2
                echo "$series $c"
                return 0
            fi
            echo "fetch: $series: apt-get update failed:" >&2
            cat "$d"/update.log >&2
            return 1
        fi
    fi
    # Resolved again only after an update (parsing the lists takes seconds).
    if [ ! -s "$d"/resolved ]; then
        # linux-image-amd64 (the metapackage) depends on the newest ABI's image.
        abi=$($apt apt-cache depends linux-image-amd64 |
            sed -n 's/^ *Depends: linux-image-\(.*-amd64\)$/\1/p' | head -1)
        [ -n "$abi" ] || fail "$series: linux-image-amd64 names no linux-image-*-amd64" || return
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
    if [ ! -f "$dir/vmlinuz" ] && ! download "$series" "$pkg" "$ver" "$abi" "$dir"; then
        local c
        c=$(newest_cached "$series")
        [ -n "$c" ] || return 1
        echo "fetch: $series: using the cached ${c%% *}" >&2
        echo "$series $c"
        return 0
    fi
    echo "$series $ver $dir/vmlinuz"
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
    if ! { mkdir -p "$dir" && cp "$f" "$dir/vmlinuz.tmp" && echo "$ver" > "$dir/version" &&
        echo "$abi" > "$dir/abi" && echo "$pkg" > "$dir/package" &&
        mv "$dir/vmlinuz.tmp" "$dir/vmlinuz"; }; then
        rm -rf "$tmp"
        fail "$series: cannot write $dir" || return
    fi
    rm -rf "$tmp"
    for old in "$cache"/kernels/"$series"/*/; do
        [ "${old%/}" = "$dir" ] || rm -rf "$old"
    done
}

# Each series on its own: one that cannot be had does not stop the others.
rc=0
for s in "$@"; do
    fetch_one "$s" || rc=1
done
exit $rc
