#!/usr/bin/env bash
# Fuzzes everything a peer can reach (fuzz/fuzz_targets: frame headers and payloads, the client
# and server engines, ONC RPC messages and record marking, the .x compiler, raw Ethernet frames,
# generated stub readers, the shared-memory ring consumer) with cargo-fuzz and libFuzzer.
#
#   scripts/fuzz.sh [--seconds N] [TARGET...]     every target (or those named) for N seconds each
#
# Installs what it needs (the nightly toolchain cargo-fuzz builds with, and cargo-fuzz itself).
# Inputs that grew coverage collect in fuzz/corpus/TARGET (not committed); the small seed corpora
# in fuzz/seeds/TARGET are. A crash leaves its input in fuzz/artifacts/TARGET and fails the run:
# fix it, and add the input as a regression test where the crate it broke can replay it.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=60
targets=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seconds) seconds=$2; shift 2 ;;
        -h|--help) sed -n '2,11p' "$0"; exit 0 ;;
        *) targets+=("$1"); shift ;;
    esac
done
if ! rustup toolchain list | grep -q '^nightly'; then
    rustup toolchain install nightly --profile minimal
fi
if ! command -v cargo-fuzz >/dev/null 2>&1; then
    cargo install cargo-fuzz --locked
fi
if [ ${#targets[@]} -eq 0 ]; then
    mapfile -t targets < <(cd fuzz && cargo +nightly fuzz list)
fi
(cd fuzz && cargo +nightly fuzz build -O)
failed=()
for t in "${targets[@]}"; do
    mkdir -p "fuzz/corpus/$t" "fuzz/seeds/$t"
    log="fuzz/corpus/$t.log"
    echo "fuzz: $t for ${seconds}s"
    if (cd fuzz && cargo +nightly fuzz run -O "$t" "corpus/$t" "seeds/$t" -- \
            -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1) >"$log" 2>&1; then
        runs=$(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$' || echo '?')
        echo "fuzz: $t: $runs runs, no crash"
    else
        echo "fuzz: $t FAILED; its input is in fuzz/artifacts/$t; log:"
        tail -40 "$log"
        failed+=("$t")
    fi
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: crashes in ${failed[*]}"
    exit 1
fi
echo "fuzz: ${#targets[@]} targets, ${seconds}s each, no crash"
