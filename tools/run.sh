#!/usr/bin/env bash
# `make run`: the server and the agent of this checkout, side by side, in the
# foreground. Ctrl-C (or SIGTERM) stops both: the agent first, so its last
# window reaches the server.
set -euo pipefail

usage() {
    cat <<EOF
Usage: tools/run.sh [--port PORT] [--data-dir DIR] [--interval SECONDS]

Starts build/codexray-server (SQLite under DIR, default ./data) on
127.0.0.1:PORT (default 8080) and build/codexray-node-agent shipping to it
(its spool in DIR/agent), prints the UI's address and waits; Ctrl-C stops
both. Run as root (the agent loads BPF); 'make run' builds first.
Neither reads /etc/codexray/*.conf; CODEXRAY_* variables still apply.

  --port PORT          the server's port (default 8080)
  --data-dir DIR       the server's store and the agent's spool (default ./data)
  --interval SECONDS   the agent's window (default 60)
  -h, --help           this text
EOF
}

bad_usage() {
    echo "run.sh: $*" >&2
    echo "Run 'tools/run.sh --help' for usage." >&2
    exit 2
}

port=8080
data=./data
interval=60
while [ $# -gt 0 ]; do
    case "$1" in
    --port) [ $# -ge 2 ] || bad_usage "--port needs a value"; port=$2; shift 2 ;;
    --data-dir) [ $# -ge 2 ] || bad_usage "--data-dir needs a value"; data=$2; shift 2 ;;
    --interval) [ $# -ge 2 ] || bad_usage "--interval needs a value"; interval=$2; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) bad_usage "unknown argument '$1'" ;;
    esac
done
case "$port" in '' | *[!0-9]*) bad_usage "--port must be a number" ;; esac
case "$interval" in '' | *[!0-9]*) bad_usage "--interval must be a number of seconds" ;; esac

cd "$(dirname "$0")/.."
for b in build/codexray-server build/codexray-node-agent; do
    [ -x "$b" ] || { echo "run.sh: $b is missing: run 'make' (or 'make run') first" >&2; exit 1; }
done
if [ "$(id -u)" -ne 0 ]; then
    echo "run.sh: the agent needs root (BPF, perf events): run 'make run' as root" >&2
    exit 1
fi
mkdir -p "$data/agent"

server_pid=""
agent_pid=""
# shellcheck disable=SC2317 # called by the traps below
stop() {
    trap - INT TERM EXIT
    if [ -n "$agent_pid" ]; then
        kill -TERM "$agent_pid" 2>/dev/null || true
        wait "$agent_pid" 2>/dev/null || true
    fi
    if [ -n "$server_pid" ]; then
        kill -TERM "$server_pid" 2>/dev/null || true
        wait "$server_pid" 2>/dev/null || true
    fi
    echo "run.sh: stopped" >&2
}
trap 'stop; exit 130' INT
trap 'stop; exit 143' TERM
trap stop EXIT

url="http://127.0.0.1:$port"
# Each in its own session: Ctrl-C reaches only this script, which stops the
# agent before the server.
setsid build/codexray-server --config /dev/null --listen "127.0.0.1:$port" --data-dir "$data" &
server_pid=$!
for _ in $(seq 50); do
    curl -fsS "$url/healthz" >/dev/null 2>&1 && break
    kill -0 "$server_pid" 2>/dev/null || { echo "run.sh: the server exited; see its lines above" >&2; exit 1; }
    sleep 0.1
done
curl -fsS "$url/healthz" >/dev/null || { echo "run.sh: the server does not answer on $url/healthz" >&2; exit 1; }

setsid build/codexray-node-agent --config /dev/null --endpoint "$url" --data-dir "$data/agent" \
    --interval "$interval" &
agent_pid=$!

echo "UI: $url/"
echo "run.sh: the first profiles arrive after one window (${interval} s); Ctrl-C stops both" >&2
# Either one exiting ends the run.
wait -n "$server_pid" "$agent_pid" || true
echo "run.sh: a process exited; stopping the other" >&2
exit 1
