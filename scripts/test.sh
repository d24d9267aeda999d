#!/usr/bin/env bash
# The whole test suite: installs what the tests need, runs every crate's tests (the test-release
# profile: optimised as release, compiled crate by crate; the protocol simulations and transport
# tests run many thousands of calls), then the Python package's tests (pytest, in the virtual
# environment scripts/deps/python.sh installs the package into), then every fuzz target briefly
# (scripts/fuzz.sh; LOWLAT_FUZZ_SECONDS, default 15: eight targets in the two minutes six had).
# The counting build (the example `count_calls` with lowlat's callgrind marks) is built first,
# for the test that holds the call path's instruction counts under their ceilings.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export LOWLAT_REQUIRE_PEERS=1 LOWLAT_REQUIRE_CHROMIUM=1 LOWLAT_REQUIRE_PROMETHEUS=1 LOWLAT_REQUIRE_TSHARK=1
export LOWLAT_REQUIRE_VALGRIND=1
cargo build --profile test-release -p lowlat-lab --features callgrind --example count_calls
cargo test --workspace --profile test-release -- --test-threads=2 "$@"
target/venv/bin/python -m pytest python/tests -q
scripts/fuzz.sh --seconds "${LOWLAT_FUZZ_SECONDS:-15}"
