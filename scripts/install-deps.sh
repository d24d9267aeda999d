#!/usr/bin/env bash
# Installs everything lowlat's build, tests and laboratory need on a fresh Debian machine:
# each script in scripts/deps/ installs what its part needs, only if missing.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
if ! command -v cargo >/dev/null 2>&1; then
    echo "install-deps: cargo not found; install a stable Rust toolchain (rustup) first" >&2
    exit 1
fi
for s in "$here"/deps/*.sh; do
    bash "$s"
done
