#!/usr/bin/env bash
# Two builds of the `lowlat` command, side by side in one run: the null call over udp, tcp, shm
# and onc+udp, busy-polling, server pinned to CPU 1 and caller to CPU 0, in ROUNDS alternating
# rounds (odd rounds run build A first, even rounds build B first, so a drift of the host falls
# on both), then each transport's median p50 and p99 per build and the median of the rounds'
# B/A ratios. What a refactoring or a diet of the call path is judged by ("no change beyond
# noise"; the noise is the spread of the rounds, printed beside).
#   scripts/compare-builds.sh A_BINARY B_BINARY [CALLS]      (ROUNDS=3 by default)
#   e.g. scripts/compare-builds.sh /tmp/lowlat-before target/release/lowlat 200000
set -euo pipefail
a="${1:?usage: compare-builds.sh A_BINARY B_BINARY [CALLS]}"
b="${2:?usage: compare-builds.sh A_BINARY B_BINARY [CALLS]}"
calls="${3:-200000}"
rounds="${ROUNDS:-3}"
transports="${TRANSPORTS:-udp tcp shm onc+udp}"
dir=$(mktemp -d /tmp/lowlat-compare.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'cleanup; rm -rf "$dir"' EXIT
port=$((40000 + $$ % 20000))
uri_for() { # TRANSPORT -> a fresh URI
    port=$((port + 1))
    case "$1" in
    shm) echo "shm://$dir/s$port.sock" ;;
    *) echo "$1://127.0.0.1:$port" ;;
    esac
}
start() { # BINARY URI: the server, pinned to CPU 1, once it says it is ready
    : >"$dir/log"
    "$1" serve --spin-us forever --cpu 1 "$2" >>"$dir/log" 2>&1 &
    pids+=($!)
    for _ in $(seq 200); do grep -q '^ready' "$dir/log" && return 0; sleep 0.05; done
    echo "server $1 $2 did not start: $(cat "$dir/log")" >&2
    exit 1
}
results="$dir/results" # lines: ROUND TRANSPORT BUILD P50_NS P99_NS
run() { # ROUND TRANSPORT BUILD(a|b)
    local bin uri
    bin=$a
    [ "$3" = b ] && bin=$b
    uri=$(uri_for "$2")
    start "$bin" "$uri"
    local got
    got=$("$bin" bench "$uri" --calls "$calls" --spin-us forever --cpu 0 --json |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["p50_ns"], d["p99_ns"])')
    cleanup
    echo "$1 $2 $3 $got" >>"$results"
    printf "round %s %-8s %s p50 %8s ns  p99 %8s ns\n" "$1" "$2" "$3" $got
}
for r in $(seq "$rounds"); do
    order="a b"
    [ $((r % 2)) -eq 0 ] && order="b a"
    for t in $transports; do
        for build in $order; do run "$r" "$t" "$build"; done
    done
done
python3 - "$results" "$a" "$b" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"\nA = {sys.argv[2]}\nB = {sys.argv[3]}")
print(f"{'transport':10} {'A p50':>8} {'B p50':>8} {'B/A p50':>8} {'A p99':>8} {'B p99':>8} {'B/A p99':>8}   rounds' B/A p50")
for t in dict.fromkeys(r[1] for r in rows):
    by = {}
    for rnd, tr, build, p50, p99 in rows:
        if tr == t:
            by.setdefault(rnd, {})[build] = (float(p50), float(p99))
    ratios50 = [v["b"][0] / v["a"][0] for v in by.values()]
    ratios99 = [v["b"][1] / v["a"][1] for v in by.values()]
    med = lambda build, i: statistics.median(v[build][i] for v in by.values())
    print(f"{t:10} {med('a',0):8.0f} {med('b',0):8.0f} {statistics.median(ratios50):8.3f} "
          f"{med('a',1):8.0f} {med('b',1):8.0f} {statistics.median(ratios99):8.3f}   "
          + " ".join(f"{x:.3f}" for x in ratios50))
EOF
