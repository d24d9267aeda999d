#!/usr/bin/env bash
# What the defences against strangers cost (issues 21 and 36), in one run: the null call's and
# ECHO(1 KiB)'s p50/p99 plain, with a pre-shared key, and keyed and encrypted, over udp and eth
# (across a veth pair between two network namespaces, as root), in alternating rounds; the same against a BASE build without counters
# or the cookie round (BASE=path/to/an/older/lowlat); the bind's round trip (cookie round
# included) beside the null call's; the engines' instructions per null call with and without
# a key (callgrind); and the bind flood's figures. Servers in namespace a on CPU 1, clients in
# namespace b on CPU 0, all busy-polling.
#   [BASE=...] [ROUNDS=3] [PROFILE=release] scripts/measure-security.sh [CALLS]
# (PROFILE=test-release checks the script with quicker binaries; measure with release.)
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "measure-security.sh: needs root (network namespaces, raw sockets)" >&2; exit 1; }
calls="${1:-100000}"
rounds="${ROUNDS:-3}"
profile="${PROFILE:-release}"
cargo build --profile "$profile" -q -p lowlat-cli
cargo build --profile "$profile" -q -p lowlat-lab --examples
bin=$PWD/target/$profile
ll=$bin/lowlat
base="${BASE:-}"
source scripts/lib/testhost-servers.sh
mac=$MAC_A
key=$(mktemp)
ns_remove+=("$key")
head -c 32 /dev/urandom >"$key"
start() { ns_start "$@"; }
cleanup() { ns_stop; }
p50_p99() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%8.2f %8.2f" % (d["p50_ns"]/1e3, d["p99_ns"]/1e3))'; }
declare -A uri=([udp]="udp://10.77.250.1:7911" [eth]="eth://llshb/$mac")
declare -A bind=([udp]="udp://10.77.250.1:7911" [eth]="eth://llsha")
echo "p50 p99 (µs), busy-polling, $calls calls a row, $rounds rounds alternating"
for r in $(seq "$rounds"); do
    for t in udp eth; do
        for how in plain psk enc base; do
            case $how in
                plain) exe=$ll; flags=() ;;
                psk) exe=$ll; flags=(--psk-file "$key") ;;
                enc) exe=$ll; flags=(--psk-file "$key" --encrypt) ;;
                base) [ -n "$base" ] || continue; exe=$base; flags=() ;;
            esac
            start "$exe" serve "${bind[$t]}" --spin-us forever "${flags[@]}"
            for p in "null 0" "echo 1024"; do
                set -- $p
                res=$(ip netns exec lowlat-sh-b "$exe" bench "${uri[$t]}" --proc "$1" --size "$2" --calls "$calls" \
                    --spin-us forever --cpu 0 --json "${flags[@]}" | p50_p99)
                echo "round $r  $t  $(printf '%-5s %-9s' $how "$1($2)") $res"
            done
            cleanup
        done
    done
done

echo
echo "a client whose address changes: the first call from the new address (loopback)"
cargo test --profile "$profile" -q -p lowlat --test paths a_client_whose_address_changes -- --nocapture 2>&1 \
    | grep -E '^migration|test result'

echo
echo "the bind's round trip (cookie round included) beside the null call's, udp and eth"
for t in udp eth; do
    start "$ll" serve "${bind[$t]}" --spin-us forever
    ip netns exec lowlat-sh-b taskset -c 0 "$bin/examples/bind_time" "${uri[$t]}" 2000
    cleanup
done

echo
# valgrind's CPU has no SHA-NI: the keyed counts are of software SHA-256, an upper bound on
# what a CPU with SHA-NI runs (compare the bench rows above for time).
echo "engine instructions per null call (callgrind, 10,000 calls, in process): plain, then keyed"
for how in plain keyed; do
    valgrind --tool=callgrind --callgrind-out-file=/tmp/lowlat-engine-$how.cg \
        "$bin/examples/engine_cost" 10000 "$how" 2>&1 | grep -E 'engine|refs' || true
    callgrind_annotate /tmp/lowlat-engine-$how.cg 2>/dev/null | grep -m1 'PROGRAM TOTALS' || true
done

echo
echo "the bind flood (100,000 binds, eight source addresses, an honest client binding and calling)"
cargo test --profile "$profile" -q -p lowlat --test flood -- --nocapture 2>&1 | grep -E '^flood|test result'
