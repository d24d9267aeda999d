#!/usr/bin/env bash
# The shared-memory transport's figures in one run, servers on CPU 1 and callers on CPU 0:
# null call vs raw shm ping-pong (busy-polling), null call blocking vs a raw futex ping-pong,
# MAXARG/MAXRESULT(1440), calls/s with 1 and 2 caller threads, null call with 100 idle bindings
# beside it, and the CPU an idle server uses. (The first call after 1, 10 and 100 ms of idleness
# is in `lowlat lab`'s cold-call section.) Also: calls every 2 and 4 µs that found their binding
# asleep under adaptive spinning.
#   scripts/measure-shm.sh [CALLS]
# Raw and RPC rows alternate (ROUNDS times, then PAIRS short back-to-back pairs) because this VM's
# shared-memory floor moves with where the host places the two vCPUs: only rows of one round
# compare.
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-200000}"
rounds="${ROUNDS:-2}"
cargo build --release -q -p lowlat-cli
cargo build --release -q -p lowlat-shm --example shm_floor
ll=target/release/lowlat
floor=target/release/examples/shm_floor
dir=$(mktemp -d /tmp/lowlat-measure-shm.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'cleanup; rm -rf "$dir"' EXIT
n=0
start() { # starts a server on a fresh socket path; sets $uri
    n=$((n + 1))
    uri="shm://$dir/s$n.sock"
    : >"$dir/log" # before the server starts: a stale "ready" must not be read as its own
    "$ll" "$@" "$uri" --cpu 1 >>"$dir/log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^ready' "$dir/log" && return 0; sleep 0.05; done
    echo "server $* did not start: $(cat "$dir/log")" >&2
    exit 1
}
p50_p99() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%8.2f %8.2f" % (d["p50_ns"]/1e3, d["p99_ns"]/1e3))'; }
rate() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%10.0f calls/s %8.1f Mbit/s" % (d["calls_per_s"], d["mbit_s"]))'; }

echo "round | what                                   |  p50 µs   p99 µs"
for r in $(seq "$rounds"); do
    start pingpong --serve --spin-us forever
    echo "$r     | raw shm ping-pong 32 B, busy-poll       | $("$ll" pingpong "$uri" --size 32 --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"
    cleanup
    start serve --spin-us forever
    echo "$r     | null call, busy-poll                    | $("$ll" bench "$uri" --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"
    echo "$r     | MAXARG(1440), busy-poll                 | $("$ll" bench "$uri" --proc maxarg --size 1440 --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"
    echo "$r     | MAXRESULT(1440), busy-poll              | $("$ll" bench "$uri" --proc maxresult --size 1440 --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"
    cleanup
    echo "$r     | raw futex ping-pong (both blocking)     | $("$floor" 20000 | sed -n 's/^futex ping-pong.*p50 *\([0-9.]*\) µs *p99 *\([0-9.]*\) µs.*/   \1    \2/p')"
    start serve --spin-us 0
    echo "$r     | null call, blocking                     | $("$ll" bench "$uri" --calls $((calls / 10)) --spin-us 0 --cpu 0 --json | p50_p99)"
    cleanup
    start serve
    echo "$r     | null call, adaptive, one binding        | $("$ll" bench "$uri" --calls "$calls" --cpu 0 --json | p50_p99)"
    "$floor" hold "${uri#shm://}" 100 30 >"$dir/hold" 2>&1 &
    hold=$!
    pids+=($hold)
    for _ in $(seq 100); do grep -qs holding "$dir/hold" && break; sleep 0.05; done
    echo "$r     | null call, adaptive, +100 idle bindings | $("$ll" bench "$uri" --calls "$calls" --cpu 0 --json | p50_p99)"
    kill "$hold"; wait "$hold" 2>/dev/null || true
    cleanup
done

# The placement can change within a round, so also short raw/null pairs back to back: a pair whose
# ratio is far from the others straddled a change.
echo
echo "pair | raw shm ping-pong p50 p99 ns | null call p50 p99 ns | p50 ratio"
pair_calls=$((calls / 4))
for pair in $(seq "${PAIRS:-8}"); do
    start pingpong --serve --spin-us forever
    raw=$("$ll" pingpong "$uri" --size 32 --calls "$pair_calls" --spin-us forever --cpu 0 --json | p50_p99)
    cleanup
    start serve --spin-us forever
    rpc=$("$ll" bench "$uri" --calls "$pair_calls" --spin-us forever --cpu 0 --json | p50_p99)
    cleanup
    echo "$pair    | $raw | $rpc | $(echo "$rpc $raw" | awk '{ printf "%.2f", $1 / $3 }')"
done

echo
start serve
for t in 1 2; do
    echo "null, $t caller thread(s), adaptive: $("$ll" bench "$uri" --calls "$calls" --threads "$t" --json | rate)"
    echo "MAXRESULT(1440), $t thread(s):     $("$ll" bench "$uri" --proc maxresult --size 1440 --calls "$calls" --threads "$t" --json | rate)"
done
# Adaptive spinning keeps a binding that calls every few microseconds (inside the 5 µs budget)
# awake: how many calls still found it asleep (each pays a wake-up).
for gap in 2000 4000; do "$floor" awake "$gap" 50000; done
# An idle server: one binding open, no calls, for 5 s; CPU time of all its threads from
# /proc/PID/task/*/schedstat (nanoseconds; the clock ticks of /proc/PID/stat are 10 ms).
srv=${pids[0]}
"$floor" hold "${uri#shm://}" 1 7 >/dev/null 2>&1 &
hold=$!
pids+=($hold)
sleep 1
cpu_ns() { cat /proc/"$srv"/task/*/schedstat | awk '{ s += $1 } END { print s }'; }
t0=$(cpu_ns)
sleep 5
t1=$(cpu_ns)
echo "idle server with one open binding: $(( (t1 - t0) / 1000 )) µs of CPU in 5 s"
