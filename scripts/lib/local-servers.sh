# Sourced by the measuring scripts that run lowlat servers on this machine: builds the command
# (PROFILE, release by default) as `$ll`, makes a scratch folder `$dir` (removed at exit) and
# gives `ll_serve ARGS...` (runs `$ll ARGS... --cpu 1` as a server, its output in
# `$dir/log`; returns once it says `ready`), `ll_stop` (stops every process started, by PID;
# also at exit; the scripts add their own PIDs to `pids`) and `next_port` (a fresh port in
# `$port`).
profile="${PROFILE:-release}"
cargo build --profile "$profile" -q -p lowlat-cli
ll=target/$profile/lowlat
dir=$(mktemp -d /tmp/lowlat-measure.XXXXXX)
pids=()
ll_stop() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done
    pids=()
}
trap 'll_stop; rm -rf "$dir"' EXIT
port=$((40000 + $$ % 20000))
next_port() { port=$((port + 1)); }
ll_serve() {
    : >"$dir/log"
    "$ll" "$@" --cpu 1 >>"$dir/log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do grep -q '^ready' "$dir/log" && return 0; sleep 0.05; done
    echo "server did not start: $(cat "$dir/log")" >&2
    exit 1
}
