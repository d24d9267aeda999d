#!/usr/bin/env bash
# Instructions per call, client and server apart, part by part, counted by callgrind (the same
# count on a loaded or a quiet host, for the same build): builds lowlat and its counting build
# (the example `count_calls` with the `callgrind` feature, whose marks leave the waiting out),
# then runs `lowlat instructions` with the arguments given, e.g.
#   scripts/count-instructions.sh                          # shm, udp, tcp; NULL and MINUS
#   scripts/count-instructions.sh --schemes onc+udp --procs null --json
#   scripts/count-instructions.sh --schemes eth,xdp         # as root: across a veth pair
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "count-instructions: valgrind is needed (scripts/install-deps.sh)" >&2; exit 1; }
cargo build --release -q -p lowlat-cli
cargo build --release -q -p lowlat-lab --features callgrind --example count_calls
exec target/release/lowlat instructions "$@"
