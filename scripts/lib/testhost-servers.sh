# Sourced by the measuring scripts that run servers in test host a and their clients in test
# host b (scripts/testhosts.sh, as root): brings the hosts up now and down at exit, sets MAC_A
# (the server host's MAC), and gives `ns_start EXE ARGS...` (a server in namespace a pinned to
# CPU 1; returns once it says `ready`) and `ns_stop` (stops every server started). Files named
# in `ns_remove` are removed at exit.
ns_pids=()
ns_remove=()
ns_out=$(mktemp)
ns_remove+=("$ns_out")
ns_stop() {
    for p in "${ns_pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    ns_pids=()
}
trap 'ns_stop; rm -f "${ns_remove[@]}"; scripts/testhosts.sh down >/dev/null 2>&1 || true' EXIT
scripts/testhosts.sh up >/dev/null
MAC_A=$(ip -n lowlat-sh-a -o link show dev llsha | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p')
ns_start() {
    local exe=$1
    shift
    ip netns exec lowlat-sh-a "$exe" "$@" --cpu 1 >"$ns_out" 2>&1 &
    ns_pids+=($!)
    for _ in $(seq 100); do grep -q '^ready' "$ns_out" && return 0; sleep 0.05; done
    echo "server $* did not start: $(cat "$ns_out")" >&2
    exit 1
}
