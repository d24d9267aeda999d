#!/usr/bin/env bash
# Runs every peer that build.sh built in OUTDIR: starts its server, runs the client for the null
# call and a 1440-byte echo, prints the clients' JSON lines on stdout and stops the server by PID.
#
#   peers/run.sh OUTDIR [--calls N] [--server-cpu C --client-cpu C]
set -uo pipefail

usage() {
    echo "usage: $0 OUTDIR [--calls N] [--server-cpu C] [--client-cpu C]" >&2
    exit 2
}
[ $# -ge 1 ] || usage
out="$1"
shift
calls=10000
server_cpu=""
client_cpu=""
while [ $# -gt 0 ]; do
    case "$1" in
    --calls) calls="${2:?}"; shift 2 ;;
    --server-cpu) server_cpu="${2:?}"; shift 2 ;;
    --client-cpu) client_cpu="${2:?}"; shift 2 ;;
    *) usage ;;
    esac
done
if [ ! -f "$out/peers.txt" ]; then
    echo "run.sh: $out/peers.txt missing: run peers/build.sh $out first" >&2
    exit 1
fi

work="$(mktemp -d)"
server_pid=""
# Stops the server by PID: SIGTERM, then SIGKILL if it is still there after 5 s (a peer whose
# signal handler cannot wake its serving loop must not hold the run up).
stop_server() {
    [ -n "$server_pid" ] || return 0
    kill "$server_pid" 2>/dev/null
    for _ in $(seq 50); do
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    kill -9 "$server_pid" 2>/dev/null
    wait "$server_pid" 2>/dev/null
    server_pid=""
}
cleanup() {
    stop_server
    rm -rf "$work"
}
trap cleanup EXIT

# A port nobody listens on, TCP or UDP, read from /proc so no extra tool is needed.
free_port() {
    local port hex
    while :; do
        port=$((20000 + RANDOM % 40000))
        hex=$(printf ':%04X ' "$port")
        if ! grep -qs "$hex" /proc/net/tcp /proc/net/udp /proc/net/tcp6 /proc/net/udp6; then
            echo "$port"
            return
        fi
    done
}

status=0
while read -r system transport program template; do
    [ -n "$system" ] || continue
    addr="${template//\{port\}/$(free_port)}"
    addr="${addr//\{dir\}/$work}"
    log="$work/$system-$transport.out"
    cpu_args=()
    [ -n "$server_cpu" ] && cpu_args=(--cpu "$server_cpu")
    "$out/$program" --serve "$addr" "${cpu_args[@]}" >"$log" 2>&1 &
    server_pid=$!
    ready=0
    for _ in $(seq 100); do # 10 s at most
        if grep -qx ready "$log"; then ready=1; break; fi
        kill -0 "$server_pid" 2>/dev/null || break
        sleep 0.1
    done
    if [ $ready -ne 1 ]; then
        echo "run.sh: $system/$transport server did not start: $(head -c 300 "$log")" >&2
        status=1
    else
        cpu_args=()
        [ -n "$client_cpu" ] && cpu_args=(--cpu "$client_cpu")
        for size in 0 1440; do
            if ! timeout 120 "$out/$program" --connect "$addr" --calls "$calls" --size "$size" \
                "${cpu_args[@]}"; then
                echo "run.sh: $system/$transport client failed (size $size)" >&2
                status=1
            fi
        done
    fi
    stop_server
done <"$out/peers.txt"

if [ -s "$out/skipped.txt" ]; then
    sed 's/^/run.sh: skipped /' "$out/skipped.txt" >&2
fi
exit $status
