#!/usr/bin/env bash
# The full-size overload run (CI runs 2 s): `lowlat serve` with one worker and a four-call queue,
# SPIN calls of 1 ms offered open loop at ten times its capacity on one binding, a well-behaved
# client calling NULL on another. Prints offered, sent and served rates, the Busy count (client
# and server), the server's resident memory before and at peak, and the well-behaved client's
# p50/p99 unloaded and loaded. LOWLAT_OVERLOAD_SECONDS sets the length (default 20);
# LOWLAT_OVERLOAD_SERVER_SPIN the server's --spin-us (default: adaptive, the server's own).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOWLAT_OVERLOAD_SECONDS="${LOWLAT_OVERLOAD_SECONDS:-20}"
cargo test --profile test-release -p lowlat-cli --test overload -- --nocapture
