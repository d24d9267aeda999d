#!/usr/bin/env bash
# Instructions per null call, client and server apart, counted by callgrind (which counts
# instructions, not time: the same on a loaded or a quiet host, for the same binary): the
# `null_calls` example (client and server in one process, both blocking) run with N and 2N calls
# per scheme, and the difference divided by N, per thread (the main thread is the client, the
# `lowlat-SCHEME` thread the server). Blocking waits keep the counts repeatable; the spinning a
# busy-polling call adds is left out on purpose.
#   scripts/count-instructions.sh [EXAMPLE_BINARY] [N]
#   (default: builds target/release/examples/null_calls; N = 20000; SCHEMES="shm udp tcp")
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:-}"
n="${2:-20000}"
schemes="${SCHEMES:-shm udp tcp}"
if [ -z "$bin" ]; then
    cargo build --release -q -p lowlat --example null_calls
    bin=target/release/examples/null_calls
fi
command -v valgrind >/dev/null || { echo "count-instructions: valgrind is needed" >&2; exit 1; }
dir=$(mktemp -d /tmp/lowlat-instructions.XXXXXX)
trap 'rm -rf "$dir"' EXIT
# Instructions of each thread of one run: lines "THREAD_NAME IR" (callgrind writes a file per
# thread; its header names the thread's command and the totals line holds the count).
per_thread() { # CALLS SCHEME -> file of "NAME IR"
    local out="$dir/$2-$1"
    mkdir -p "$out"
    valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg.out" "$bin" "$1" "$2" >/dev/null 2>&1
    for f in "$out"/cg.out-*; do
        local name ir
        name=$(grep -m1 '^thread:' "$f" | awk '{print $2}')
        ir=$(grep -m1 '^totals:' "$f" | awk '{print $2}')
        echo "${name:-?} ${ir:-0}"
    done
}
printf "%-6s %14s %14s\n" scheme "client/call" "server/call"
for s in $schemes; do
    a=$(per_thread "$n" "$s")
    b=$(per_thread $((2 * n)) "$s")
    python3 - "$n" "$s" "$a" "$b" <<'EOF'
import sys
n, scheme = int(sys.argv[1]), sys.argv[2]
def parse(t):
    rows = [l.split() for l in t.strip().splitlines()]
    return {int(k): int(v) for k, v in rows}
a, b = parse(sys.argv[3]), parse(sys.argv[4])
# Thread 1 is main (the client); the server's thread is the one whose count grows most besides.
client = (b[1] - a[1]) / n
others = sorted(((b[t] - a.get(t, 0)) / n for t in b if t != 1), reverse=True)
server = others[0] if others else float("nan")
print(f"{scheme:6} {client:14.0f} {server:14.0f}")
EOF
done
