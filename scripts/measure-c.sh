#!/usr/bin/env bash
# The null call from C (the stubs lowlat gen --lang c makes of idl/lab.x, over liblowlat) beside
# the Rust client (`lowlat bench`), on shm and udp, in one run: servers on CPU 1, callers on
# CPU 0, the two clients alternating ROUNDS times against the same server.
#   scripts/measure-c.sh [CALLS] [SPIN]      SPIN: adaptive (default), forever, block
# Prints p50 and p99 in µs and C's p50 as a ratio of Rust's (issue 23 asks for at most 1.1x).
# PROFILE=test-release checks the script without the release build's whole-program link.
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-200000}"
spin="${2:-adaptive}"
rounds="${ROUNDS:-3}"
profile="${PROFILE:-release}"
cargo build --profile "$profile" -q -p lowlat-cli -p lowlat-c
ll="target/$profile/lowlat"
dir=$(mktemp -d /tmp/lowlat-measure-c.XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; wait "$p" 2>/dev/null || true; done; pids=(); }
trap 'cleanup; rm -rf "$dir"' EXIT

"$ll" gen idl/lab.x --lang c --out "$dir" >/dev/null
# shellcheck disable=SC2046 # pkg-config's flags are meant to split
gcc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I"$dir" crates/c/bench/null_bench.c "$dir/lab.c" \
    $(PKG_CONFIG_PATH=crates/c pkg-config --define-variable=libdir="$PWD/target/$profile" --cflags --libs lowlat) \
    -o "$dir/null_bench"

case "$spin" in
    adaptive) rust_spin=() ;;
    forever) rust_spin=(--spin-us forever) ;;
    block) rust_spin=(--spin-us 0) ;;
    *) rust_spin=(--spin-us "$spin") ;;
esac
port=$((20000 + RANDOM % 20000))
uris=("shm://$dir/lab.sock" "udp://127.0.0.1:$port")
: >"$dir/log"
"$ll" serve "${uris[@]}" --cpu 1 "${rust_spin[@]}" >>"$dir/log" 2>&1 &
pids+=($!)
for _ in $(seq 100); do grep -q '^ready' "$dir/log" && break; sleep 0.05; done
grep -q '^ready' "$dir/log" || { echo "server did not start: $(cat "$dir/log")" >&2; exit 1; }

p50_p99() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%8.2f %8.2f" % (d["p50_ns"]/1e3, d["p99_ns"]/1e3))'; }
echo "round | transport | client |  p50 µs   p99 µs | C p50 / Rust p50"
for r in $(seq "$rounds"); do
    for uri in "${uris[@]}"; do
        t="${uri%%://*}"
        rust=$("$ll" bench "$uri" --proc null --calls "$calls" --cpu 0 "${rust_spin[@]}" --json | p50_p99)
        c=$(taskset -c 0 "$dir/null_bench" "$uri" "$calls" "$spin" | p50_p99)
        echo "$r     | $t       | rust   | $rust |"
        echo "$r     | $t       | c      | $c | $(echo "$c $rust" | awk '{ printf "%.2fx", $1 / $3 }')"
    done
done
