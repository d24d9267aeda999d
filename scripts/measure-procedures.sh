#!/usr/bin/env bash
# Null, MINUS, MAXARG(1440) and MAXRESULT(1440) over UDP and TCP, each beside the raw ping-pong of
# the same transport, mode and message size, in one run with servers on CPU 1 and callers on CPU 0;
# then calls/s and Mbit/s with 1, 2, 4 and 8 caller threads (Firefly RPC's Table I).
#   scripts/measure-procedures.sh [CALLS]
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-50000}"
cargo build --release -q -p lowlat-cli
ll=target/release/lowlat
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; }
trap cleanup EXIT
uri=""
start() { # sets $uri to the URI the server reports; not in a subshell, so its PID is kept
    local out; out=$(mktemp)
    "$ll" "$@" --cpu 1 >"$out" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^ready' "$out" && break; sleep 0.05; done
    uri=$(sed -n 's/^serving //p' "$out" | head -1)
    rm -f "$out"
    [ -n "$uri" ] || { echo "server $* did not start" >&2; exit 1; }
}
field() { python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(d['$1'])"; }
printf '%-4s %-9s %-10s %6s | %9s %9s | %9s %9s | %7s\n' proto mode proc bytes raw_p50 raw_p99 rpc_p50 rpc_p99 rpc/raw
specs=("null 0 32" "minus 0 40" "maxarg 1440 1472" "maxresult 1440 1472")
for proto in udp tcp; do
    for spin in forever 0; do
        mode=$([ "$spin" = 0 ] && echo blocking || echo busy-poll)
        # One server at a time: two busy-polling servers on one CPU would take turns.
        start pingpong --serve "$proto://127.0.0.1:0" --spin-us "$spin"; raw=$uri
        declare -A rawj=()
        for spec in "${specs[@]}"; do
            set -- $spec
            rawj[$1]=$("$ll" pingpong "$raw" --size "$3" --calls "$calls" --spin-us "$spin" --cpu 0 --json)
        done
        cleanup; pids=()
        start serve "$proto://127.0.0.1:0" --spin-us "$spin"; rpc=$uri
        for spec in "${specs[@]}"; do
            set -- $spec
            c=$("$ll" bench "$rpc" --proc "$1" --size "$2" --calls "$calls" --spin-us "$spin" --cpu 0 --json)
            python3 -c 'import json,sys
r, c = json.loads(sys.argv[1]), json.loads(sys.argv[2])
print("%-4s %-9s %-10s %6s | %9.2f %9.2f | %9.2f %9.2f | %6.2fx" % (sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6],
      r["p50_ns"] / 1e3, r["p99_ns"] / 1e3, c["p50_ns"] / 1e3, c["p99_ns"] / 1e3, c["p50_ns"] / r["p50_ns"]))' \
                "${rawj[$1]}" "$c" "$proto" "$mode" "$1" "$3"
        done
        cleanup; pids=()
    done
done
echo
printf '%-4s %-10s %7s | %12s %10s\n' proto proc threads calls/s Mbit/s
for proto in udp tcp; do
    start serve "$proto://127.0.0.1:0"; rpc=$uri
    for spec in "null 0" "maxresult 1440"; do
        set -- $spec
        for t in 1 2 4 8; do
            c=$("$ll" bench "$rpc" --proc "$1" --size "$2" --calls "$calls" --threads "$t" --cpu 0 --json)
            printf '%-4s %-10s %7s | %12.0f %10.1f\n' "$proto" "$1" "$t" "$(echo "$c" | field calls_per_s)" "$(echo "$c" | field mbit_s)"
        done
    done
    cleanup; pids=()
done
