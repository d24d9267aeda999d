#!/usr/bin/env bash
# What serving metrics costs a call: the null call over shm and udp, busy-polling, server pinned
# to CPU 1 and caller to CPU 0, from a server without --metrics (off) and from one with
# --metrics scraped every second while the calls run (on), in ROUNDS alternating rounds (odd
# rounds off first, even rounds on first); then each transport's median p50 and p99 and the
# median of the rounds' on/off ratios.
#   scripts/measure-metrics.sh [CALLS]        (ROUNDS=3 by default)
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-200000}"
rounds="${ROUNDS:-3}"
source scripts/lib/local-servers.sh
results="$dir/results" # lines: ROUND TRANSPORT MODE P50_NS P99_NS
run() { # ROUND TRANSPORT MODE(off|on)
    next_port
    local uri="$2://127.0.0.1:$port" extra=() scraper=""
    [ "$2" = shm ] && uri="shm://$dir/s$port.sock"
    [ "$3" = on ] && extra=(--metrics 127.0.0.1:0)
    ll_serve serve --spin-us forever "${extra[@]}" "$uri"
    if [ "$3" = on ]; then
        local url
        url=$(sed -n 's/^metrics //p' "$dir/log")
        (while curl -s -o /dev/null "$url"; do sleep 1; done) &
        scraper=$!
        pids+=("$scraper")
    fi
    local got
    got=$("$ll" bench "$uri" --calls "$calls" --spin-us forever --cpu 0 --json |
        python3 -c 'import json,sys; d=json.loads(sys.stdin.readline()); print(d["p50_ns"], d["p99_ns"])')
    ll_stop
    echo "$1 $2 $3 $got" >>"$results"
    printf "round %s %-4s metrics %-3s p50 %8s ns  p99 %8s ns\n" "$1" "$2" "$3" $got
}
for r in $(seq "$rounds"); do
    order="off on"
    [ $((r % 2)) -eq 0 ] && order="on off"
    for t in shm udp; do
        for mode in $order; do run "$r" "$t" "$mode"; done
    done
done
python3 - "$results" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
print(f"\n{'transport':10} {'off p50':>8} {'on p50':>8} {'on/off':>7} {'off p99':>8} {'on p99':>8} {'on/off':>7}   rounds' on/off p50")
for t in dict.fromkeys(r[1] for r in rows):
    by = {}
    for rnd, tr, mode, p50, p99 in rows:
        if tr == t:
            by.setdefault(rnd, {})[mode] = (float(p50), float(p99))
    r50 = [v["on"][0] / v["off"][0] for v in by.values()]
    r99 = [v["on"][1] / v["off"][1] for v in by.values()]
    med = lambda m, i: statistics.median(v[m][i] for v in by.values())
    print(f"{t:10} {med('off',0):8.0f} {med('on',0):8.0f} {statistics.median(r50):7.3f} "
          f"{med('off',1):8.0f} {med('on',1):8.0f} {statistics.median(r99):7.3f}   "
          + " ".join(f"{x:.3f}" for x in r50))
EOF
