#!/usr/bin/env bash
# Installs the CodeXray node agent (and, with --server, the server) on a
# Linux host as systemd services. See --help.
set -euo pipefail

prog=install.sh
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

usage() {
    cat <<EOF
Usage: deploy/install.sh --endpoint URL [--api-key KEY] [OPTIONS]
       deploy/install.sh --server [--listen ADDR:PORT] [--api-key KEY] [OPTIONS]
       deploy/install.sh --uninstall [--keep-data] [--root DIR]

Installs codexray-node-agent into /usr/local/bin, writes /etc/codexray/agent.conf
(mode 0600: endpoint and API key) and registers the systemd service
codexray-node-agent (enabled, and started when systemd is running).

  --endpoint URL       the codexray-server the agent ships to, e.g. http://10.0.0.5:8080
                       (with --server, default http://127.0.0.1:PORT of --listen)
  --api-key KEY        sent as 'Authorization: Bearer KEY' (default: \$CODEXRAY_API_KEY);
                       with --server, the key the server requires
  --server             also install codexray-server and its service (data in
                       /var/lib/codexray-server, settings in /etc/codexray/server.conf)
  --listen ADDR:PORT   where the server listens (default 127.0.0.1:8080)
  --no-build           do not run make; take the binaries from build/ as they are
  --bin-dir DIR        take the binaries from DIR (implies --no-build)
  --root DIR           install into DIR instead of / (a staging or test root);
                       units are enabled offline, nothing is started
  --uninstall          stop and remove the services, binaries, config and data
  --keep-data          with --uninstall: keep /var/lib/codexray-agent and
                       /var/lib/codexray-server
  -h, --help           this text

Without --no-build or --bin-dir, the binaries are built first with 'make'
(which installs the Debian packages the build needs). Run as root.
EOF
}

die() {
    echo "$prog: $*" >&2
    exit 1
}

bad_usage() {
    echo "$prog: $*" >&2
    echo "Run 'deploy/install.sh --help' for usage." >&2
    exit 2
}

endpoint=""
api_key="${CODEXRAY_API_KEY:-}"
server=0
listen=127.0.0.1:8080
build=1
bin_dir="$repo/build"
root=/
uninstall=0
keep_data=0

need_arg() {
    [ "$2" -ge 2 ] || bad_usage "$1 needs a value"
}

while [ $# -gt 0 ]; do
    case "$1" in
    --endpoint) need_arg "$1" $#; endpoint=$2; shift 2 ;;
    --endpoint=*) endpoint=${1#*=}; shift ;;
    --api-key) need_arg "$1" $#; api_key=$2; shift 2 ;;
    --api-key=*) api_key=${1#*=}; shift ;;
    --server) server=1; shift ;;
    --listen) need_arg "$1" $#; listen=$2; shift 2 ;;
    --listen=*) listen=${1#*=}; shift ;;
    --no-build) build=0; shift ;;
    --bin-dir) need_arg "$1" $#; bin_dir=$2; build=0; shift 2 ;;
    --bin-dir=*) bin_dir=${1#*=}; build=0; shift ;;
    --root) need_arg "$1" $#; root=$2; shift 2 ;;
    --root=*) root=${1#*=}; shift ;;
    --uninstall) uninstall=1; shift ;;
    --keep-data) keep_data=1; shift ;;
    -h | --help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
    esac
done

[ -n "$root" ] || bad_usage "--root needs a directory"
[ -d "$root" ] || bad_usage "--root $root is not a directory"
root=$(cd "$root" && pwd)
# Paths below are "$R/etc/..."; with root / that is "/etc/...".
R=${root%/}

if [ "$(id -u)" -ne 0 ] && [ "$root" = / ]; then
    die "run as root (or use --root DIR to stage the files elsewhere)"
fi

bin=/usr/local/bin
unit_dir=/etc/systemd/system
conf_dir=/etc/codexray
doc_dir=/usr/local/share/doc/codexray
units=(codexray-node-agent.service codexray-server.service)

# systemd is managing this machine (and we install into it): start and stop
# units for real. Otherwise only enable/disable them offline.
live=0
if [ "$root" = / ] && [ -d /run/systemd/system ]; then
    live=1
fi
have_systemctl=0
command -v systemctl >/dev/null 2>&1 && have_systemctl=1

# Config values are `key = value` lines where '#' starts a comment.
check_value() {
    case "$2" in
    *[[:space:]\#\"\']*) bad_usage "$1 must not contain spaces, quotes or '#'" ;;
    esac
}

# Writes stdin to a root-only file, replacing it in one step.
write_private() {
    local dst=$1 tmp
    tmp=$(mktemp "$dst.XXXXXX")
    cat >"$tmp"
    chmod 0600 "$tmp"
    mv -f "$tmp" "$dst"
}

# The config file deploy/config/NAME (which the Debian packages ship as it
# is) with KEY set to VALUE for each pair after it: its `KEY = ...` or
# `# KEY = ...` line becomes `KEY = VALUE`, or, with an empty VALUE, stays
# or becomes a comment. Values pass check_value first; they reach awk
# through the environment, which (unlike -v) leaves backslashes alone.
config_from() {
    local name=$1 keys=""
    shift
    while [ $# -ge 2 ]; do
        keys="$keys $1"
        export "CXCONF_$1=$2"
        shift 2
    done
    echo "# Written by deploy/install.sh from deploy/config/$name."
    CXCONF_KEYS=$keys awk '
        BEGIN { n = split(ENVIRON["CXCONF_KEYS"], keys, " ") }
        {
            for (i = 1; i <= n; i++) {
                k = keys[i]
                if ($0 ~ "^(# )?" k " = ") {
                    v = ENVIRON["CXCONF_" k]
                    print (v != "" ? k " = " v : ($0 ~ /^# / ? $0 : "# " $0))
                    seen[k] = 1
                    next
                }
            }
            print
        }
        END {
            for (i = 1; i <= n; i++)
                if (!(keys[i] in seen)) { print "no line for " keys[i] > "/dev/stderr"; exit 1 }
        }' "$repo/deploy/config/$name"
}

do_uninstall() {
    local u f
    if [ "$live" = 1 ]; then
        for u in "${units[@]}"; do
            if [ -e "$unit_dir/$u" ]; then
                systemctl disable --now "$u" || echo "$prog: could not stop $u" >&2
            fi
        done
    elif [ "$have_systemctl" = 1 ]; then
        for u in "${units[@]}"; do
            if [ -e "$R$unit_dir/$u" ]; then
                systemctl --root="$root" --quiet disable "$u"
            fi
        done
    fi
    for u in "${units[@]}"; do
        rm -f "$R$unit_dir/$u"
        rm -rf "$R$unit_dir/$u.d"
    done
    if [ "$live" = 1 ]; then
        systemctl daemon-reload
    fi
    for f in "$R$bin/codexray-node-agent" "$R$bin/codexray-server" \
        "$R$conf_dir/agent.conf" "$R$conf_dir/server.conf" "$R$doc_dir/README.md"; do
        rm -f "$f"
    done
    rmdir "$R$doc_dir" 2>/dev/null || true
    if [ -d "$R$conf_dir" ] && ! rmdir "$R$conf_dir" 2>/dev/null; then
        echo "$prog: kept $conf_dir: it holds files this script did not write" >&2
    fi
    if [ "$keep_data" = 1 ]; then
        echo "$prog: kept the data in /var/lib/codexray-agent and /var/lib/codexray-server"
    else
        # DynamicUser= keeps the server's state in /var/lib/private.
        rm -rf "$R/var/lib/codexray-agent" "$R/var/lib/codexray-server" \
            "$R/var/lib/private/codexray-server"
    fi
    echo "$prog: uninstalled from $root"
}

if [ "$uninstall" = 1 ]; then
    do_uninstall
    exit 0
fi

# --- install ---
if [ -z "$endpoint" ]; then
    [ "$server" = 1 ] || bad_usage "--endpoint URL is required (or --server for this host's own server)"
    endpoint="http://127.0.0.1:${listen##*:}"
fi
case "$endpoint" in
http://?* | https://?*) ;;
*) bad_usage "--endpoint must be an http:// or https:// URL, not '$endpoint'" ;;
esac
check_value --endpoint "$endpoint"
check_value --api-key "$api_key"
case "$listen" in
*:[0-9]*) ;;
*) bad_usage "--listen must be ADDR:PORT, e.g. 0.0.0.0:8080" ;;
esac
check_value --listen "$listen"

if [ "$build" = 1 ]; then
    echo "$prog: building (make -C $repo)"
    make -C "$repo" -j2 all
fi
need=(codexray-node-agent)
[ "$server" = 1 ] && need+=(codexray-server)
for b in "${need[@]}"; do
    [ -x "$bin_dir/$b" ] || die "$bin_dir/$b is missing or not executable (build it with 'make', or give --bin-dir)"
    "$bin_dir/$b" --version >/dev/null || die "$bin_dir/$b does not run here (--version failed)"
done

install -d -m 0755 "$R$bin" "$R$unit_dir" "$R$conf_dir" "$R$doc_dir"
for b in "${need[@]}"; do
    install -m 0755 "$bin_dir/$b" "$R$bin/$b.new"
    mv -f "$R$bin/$b.new" "$R$bin/$b"
done
install -m 0644 "$repo/README.md" "$R$doc_dir/README.md"

conf=$(config_from agent.conf endpoint "$endpoint" api_key "$api_key") ||
    die "deploy/config/agent.conf: cannot set endpoint and api_key"
write_private "$R$conf_dir/agent.conf" <<<"$conf"
install -m 0644 "$repo/deploy/systemd/codexray-node-agent.service" "$R$unit_dir/"
installed=(codexray-node-agent.service)

if [ "$server" = 1 ]; then
    conf=$(config_from server.conf listen "$listen" api_key "$api_key") ||
        die "deploy/config/server.conf: cannot set listen and api_key"
    write_private "$R$conf_dir/server.conf" <<<"$conf"
    install -m 0644 "$repo/deploy/systemd/codexray-server.service" "$R$unit_dir/"
    installed=(codexray-server.service "${installed[@]}")
fi

if [ "$live" = 1 ]; then
    systemctl daemon-reload
    for u in "${installed[@]}"; do
        systemctl enable "$u"
        systemctl restart "$u" || die "$u did not start; see: systemctl status $u; journalctl -u $u"
    done
    echo "$prog: installed and started ${installed[*]}; check: systemctl status codexray-node-agent"
elif [ "$have_systemctl" = 1 ]; then
    for u in "${installed[@]}"; do
        systemctl --root="$root" --quiet enable "$u"
    done
    if [ "$root" = / ]; then
        echo "$prog: systemd is not running on this machine (no /run/systemd/system): ${installed[*]} enabled for the next boot, not started"
    else
        echo "$prog: installed into $root: ${installed[*]} enabled there, not started"
    fi
else
    echo "$prog: no systemctl here: the units are in $R$unit_dir but not enabled"
fi
