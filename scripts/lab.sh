#!/usr/bin/env bash
# lowlat's main job: builds lowlat and runs the laboratory on this machine (`--quick` for the
# short run; `--out DIR` for results.json and report.html). Root adds the raw Ethernet rows.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh >&2
cargo build --release -p lowlat-cli >&2
exec target/release/lowlat lab "$@"
