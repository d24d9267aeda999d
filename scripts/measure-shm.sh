#!/usr/bin/env bash
# Every figure of the shared-memory transport in one run, servers pinned to CPU 1 and callers to
# CPU 0, in ROUNDS alternating rounds (odd rounds run the rows in order, even rounds in reverse,
# so a drift in where the host places the two vCPUs falls on both sides of every ratio), then the
# median of each round's ratio:
#   - the machine's floor (lowlat pingpong --floor: one message each way through cache lines),
#     32 B and 1 KiB;
#   - the ring exchange (lowlat pingpong: lowlat's transport, no RPC), 32 B;
#   - the null call, ECHO(1 KiB), MAXARG(1440) and MAXRESULT(1440), busy-polling;
#   - iceoryx2 request-response (8 bytes each way, busy-waiting; peers/build.sh);
#   - the blocking null call beside a futex ping-pong (two threads, both blocking);
#   - the adaptive null call alone and with 100 idle bindings beside it.
# Each round also measures the 32 B floor at its other end; a round whose two floors differ by
# more than 1.5x (the host moved the vCPUs during it: within a placement the floor varies by up
# to a third, a move changes it 4-5x) is left out of the medians, and the output says so.
# Then calls/s from 1 and 2 caller threads, allocations per call (crates/lab/tests/alloc.rs),
# and `lowlat account shm://`.
#   scripts/measure-shm.sh [CALLS]        (ROUNDS=5 by default; at least 5 for the report)
# PROFILE=test-release builds quicker binaries, to check the script itself (not for figures).
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-200000}"
rounds="${ROUNDS:-5}"
profile="${PROFILE:-release}"
cargo build --profile "$profile" -q -p lowlat-cli
cargo build --profile "$profile" -q -p lowlat-lab --example shm_baselines
ll=target/$profile/lowlat
baselines=target/$profile/examples/shm_baselines
dir=$(mktemp -d /tmp/lowlat-measure-shm.XXXXXX)
bash peers/build.sh "$dir/peers" >/dev/null 2>&1 || true
ice="$dir/peers/iceoryx2_peer"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'cleanup; rm -rf "$dir"' EXIT
n=0
start() { # starts `lowlat ARGS URI --cpu 1` on a fresh socket path; sets $uri
    n=$((n + 1))
    uri="shm://$dir/s$n.sock"
    : >"$dir/log" # before the server starts: a stale "ready" must not be read as its own
    "$ll" "$@" "$uri" --cpu 1 >>"$dir/log" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^ready' "$dir/log" && return 0; sleep 0.05; done
    echo "server $* did not start: $(cat "$dir/log")" >&2
    exit 1
}
p50_p99() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print(d["p50_ns"], d["p99_ns"])'; }
rate() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%10.0f calls/s %8.1f Mbit/s" % (d["calls_per_s"], d["mbit_s"]))'; }
results="$dir/results" # lines: ROUND ROW P50_NS P99_NS
record() { echo "$r $1 $2" >>"$results"; printf "%-3s %-22s %s\n" "$r" "$1" "$2"; }

floor_row() { # NAME SIZE: the machine's floor for SIZE-byte messages, recorded as NAME
    start pingpong --serve --floor
    record "$1" "$("$ll" pingpong --floor "$uri" --size "$2" --calls "$calls" --cpu 0 --json | p50_p99)"
    cleanup
}
row_floor32() { floor_row floor-32 32; }
row_floor32_check() { floor_row floor-32-check 32; }
row_floor1k() { floor_row floor-1024 1024; }
row_ring() { start pingpong --serve --spin-us forever; record ring-32 "$("$ll" pingpong "$uri" --size 32 --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"; cleanup; }
row_rpc() {
    start serve --spin-us forever
    record null "$("$ll" bench "$uri" --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"
    record echo-1024 "$("$ll" bench "$uri" --proc echo --size 1024 --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"
    record maxarg-1440 "$("$ll" bench "$uri" --proc maxarg --size 1440 --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"
    record maxresult-1440 "$("$ll" bench "$uri" --proc maxresult --size 1440 --calls "$calls" --spin-us forever --cpu 0 --json | p50_p99)"
    cleanup
}
row_iceoryx2() {
    [ -x "$ice" ] || { echo "iceoryx2 peer not built: $(cat "$dir/peers/skipped.txt" 2>/dev/null)" >&2; return 0; }
    local addr="iox2://lowlat-measure-$$-$r"
    : >"$dir/ilog"
    "$ice" --serve "$addr" --cpu 1 >"$dir/ilog" 2>&1 &
    pids+=($!)
    for _ in $(seq 100); do grep -q '^ready' "$dir/ilog" && break; sleep 0.05; done
    record iceoryx2-null "$("$ice" --connect "$addr" --calls "$calls" --size 0 --cpu 0 | p50_p99)"
    cleanup
}
row_blocking() {
    record futex "$("$baselines" futex $((calls / 20)) | sed -n 's/.*p50 *\([0-9.]*\) µs *p99 *\([0-9.]*\) µs.*/\1 \2/p' | awk '{ print $1 * 1000, $2 * 1000 }')"
    start serve --spin-us 0
    record null-blocking "$("$ll" bench "$uri" --calls $((calls / 20)) --spin-us 0 --cpu 0 --json | p50_p99)"
    cleanup
}
row_idle() {
    start serve
    record null-adaptive "$("$ll" bench "$uri" --calls "$calls" --cpu 0 --json | p50_p99)"
    "$baselines" hold "${uri#shm://}" 100 600 >"$dir/hold" 2>&1 &
    local hold=$!
    pids+=($hold)
    for _ in $(seq 100); do grep -qs holding "$dir/hold" && break; sleep 0.05; done
    record null-100-idle "$("$ll" bench "$uri" --calls "$calls" --cpu 0 --json | p50_p99)"
    cleanup
}
rows=(row_floor32 row_ring row_rpc row_floor1k row_iceoryx2 row_blocking row_idle)

echo "round row                    p50_ns p99_ns"
for r in $(seq "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then order=("${rows[@]}"); else order=(); for ((i = ${#rows[@]} - 1; i >= 0; i--)); do order+=("${rows[$i]}"); done; fi
    # The 32 B floor once more, at the other end of the round from its own row (which comes
    # first in odd rounds, last in even ones), so that the two bracket the round.
    if [ $((r % 2)) -eq 0 ]; then row_floor32_check; fi
    for f in "${order[@]}"; do "$f"; done
    if [ $((r % 2)) -eq 1 ]; then row_floor32_check; fi
done

echo
echo "Median over the $rounds rounds (less any left out below) of each round's ratio (p50; p99 where named):"
python3 - "$results" <<'EOF'
import sys, statistics
rows = {}
for line in open(sys.argv[1]):
    r, name, p50, p99 = line.split()
    rows.setdefault(name, {})[int(r)] = (float(p50), float(p99))
own, check = rows.get("floor-32", {}), rows.get("floor-32-check", {})
moved = {r for r in own if r in check and max(own[r][0], check[r][0]) > 1.5 * max(min(own[r][0], check[r][0]), 1)}
for r in sorted(moved):
    print("  round %d left out: the floor moved during it (32 B: %d and %d ns at p50, at its two ends)" % (r, own[r][0], check[r][0]))
def ratio(a, b, q=0):
    v = [rows[a][r][q] / rows[b][r][q] for r in rows.get(a, {}) if r in rows.get(b, {}) and rows[b][r][q] > 0 and r not in moved]
    return "%.2fx (rounds: %s)" % (statistics.median(v), " ".join("%.2f" % x for x in v)) if v else "-"
for a, b, q, what in [
    ("null", "floor-32", 0, "null call p50 / floor 32 B p50 (target <= 1.3x)"),
    ("null", "floor-32", 1, "null call p99 / floor 32 B p99 (target <= 1.5x)"),
    ("ring-32", "floor-32", 0, "ring exchange / floor 32 B"),
    ("null", "ring-32", 0, "null call / ring exchange"),
    ("echo-1024", "floor-1024", 0, "ECHO(1 KiB) / floor 1 KiB (target <= 1.3x)"),
    ("maxarg-1440", "floor-1024", 0, "MAXARG(1440) / floor 1 KiB"),
    ("maxresult-1440", "floor-1024", 0, "MAXRESULT(1440) / floor 1 KiB"),
    ("iceoryx2-null", "floor-32", 0, "iceoryx2 request-response / floor 32 B"),
    ("iceoryx2-null", "null", 0, "iceoryx2 request-response / lowlat null call"),
    ("null-blocking", "futex", 0, "blocking null call / futex ping-pong (target <= 1.1x)"),
    ("null-100-idle", "null-adaptive", 0, "null call with 100 idle bindings / alone (target within 10%)"),
]:
    print("  %-62s %s" % (what, ratio(a, b, q)))
EOF

echo
start serve
for t in 1 2; do
    echo "null, $t caller thread(s), pinned to CPU 0: $("$ll" bench "$uri" --calls "$calls" --threads "$t" --cpu 0 --json | rate)"
    echo "null, $t caller thread(s), unpinned:        $("$ll" bench "$uri" --calls "$calls" --threads "$t" --json | rate)"
done
cleanup
echo
echo "allocations per steady-state call (fails if any):"
cargo test --profile "$profile" -q -p lowlat-lab --test alloc 2>&1 | grep -E "test result|panicked|allocations" || true
echo
echo "lowlat account shm:// (where the time of a null call goes):"
"$ll" account "shm://$dir/account.sock" --calls "$calls"
