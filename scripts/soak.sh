#!/usr/bin/env bash
# The long versions of the fault tests, for a person to run on purpose (CI runs short ones):
#   - LOWLAT_SOAK_CALLS (default 1,000,000) COUNT calls from 4 threads through `lowlat relay`'s
#     faults (5% drop, 5% duplication, 5% reordering, 1% corruption, both ways): every call
#     succeeds or fails typed, no value comes back twice, the server's counter agrees; and
#     LOWLAT_FRAME_SOAK_CALLS (default 100,000) the same over eth:// and xdp:// (as root) through
#     a frame relay between the test namespaces;
#   - LOWLAT_RESTART_CYCLES (default 100) kill -9 and restart cycles of a server under one client,
#     over udp, tcp and shm, and of the conformance suite's server (SIGKILL during calls from two
#     threads) on every transport (eth:// and xdp:// as root);
#   - LOWLAT_KILL_CYCLES (default 1,000) clients killed with SIGKILL in a loop, on every
#     transport: the server's fds, sessions and memory before and after.
# Prints each test's figures (the soak's wall time, the time from a server's return to the
# first successful call, the server's fds, RSS and sessions around the client kill loop).
set -euo pipefail
cd "$(dirname "$0")/.."
export LOWLAT_SOAK_CALLS="${LOWLAT_SOAK_CALLS:-1000000}" LOWLAT_RESTART_CYCLES="${LOWLAT_RESTART_CYCLES:-100}"
export LOWLAT_KILL_CYCLES="${LOWLAT_KILL_CYCLES:-1000}" LOWLAT_FRAME_SOAK_CALLS="${LOWLAT_FRAME_SOAK_CALLS:-100000}"
cargo test --profile test-release -p lowlat --test soak -- --nocapture
cargo test --profile test-release -p lowlat-cli --test cli -- --nocapture a_client_outlives_its_servers_kill_and_restart
cargo test --profile test-release -p lowlat --test conformance -- --nocapture --test-threads=2 killed_ 2>&1 \
    | grep -E '^(test |[a-z+]+: [0-9]+ (kill|clients))|panicked|SKIPPED'
