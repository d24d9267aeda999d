#!/usr/bin/env bash
# Many calls in flight against the machine's throughput floor, in the same run: for shm and udp,
# the floor's exchanges/s (`pingpong --floor --in-flight W`) beside lowlat's null calls/s kept W
# in flight by one thread (`bench --in-flight W`), with each side's CPU per exchange or call;
# tasks on one async executor (`bench --tasks C`, C = 1 and 64: calls/s, p50, p99.9, longest
# run of one task); tcp, onc+udp and onc+tcp at W = 1 and 16. Server pinned to CPU 1, caller
# to CPU 0, busy-polling; ROUNDS rounds (3 by default), alternating which W runs first. Prints
# one line per measurement: ROUND WHAT W RATE_PER_S P50_NS P99_NS SERVER_CPU_NS (CLIENT_CPU_NS
# for the floors; LONGEST_RUN for tasks), then each line's median over the rounds.
#   scripts/measure-in-flight.sh [CALLS]        (CALLS: shm calls per point, 1,000,000 default)
set -euo pipefail
cd "$(dirname "$0")/.."
calls="${1:-1000000}"
rounds="${ROUNDS:-3}"
source scripts/lib/local-servers.sh
results="$dir/results"
serve() { ll_serve "$@" --spin-us forever; }
json() { python3 -c "import json,sys; d=json.loads(sys.stdin.read()); print(' '.join(str(round(d.get(k) or 0)) for k in sys.argv[1:]))" "$@"; }
windows() { if [ $(($1 % 2)) -eq 1 ]; then echo "$2"; else echo "$2" | tr ' ' '\n' | tac | tr '\n' ' '; fi; }

for round in $(seq "$rounds"); do
    for transport in shm udp; do
        next_port
        uri="udp://127.0.0.1:$port"
        [ "$transport" = shm ] && uri="shm://$dir/f$port.sock"
        n=$calls
        [ "$transport" = udp ] && n=$((calls / 5))
        serve pingpong --serve --floor "$uri"
        for w in $(windows "$round" "1 4 16 64"); do
            echo "$round $transport-floor $w $("$ll" pingpong --floor "$uri" --in-flight "$w" --calls $((n * 2)) --cpu 0 --json |
                json exchanges_per_s none none server_cpu_ns_per_exchange client_cpu_ns_per_exchange)" >>"$results"
        done
        ll_stop
        next_port
        uri="udp://127.0.0.1:$port"
        [ "$transport" = shm ] && uri="shm://$dir/r$port.sock"
        serve serve "$uri"
        for w in $(windows "$round" "1 4 16 64"); do
            echo "$round $transport-rpc $w $("$ll" bench "$uri" --in-flight "$w" --calls "$n" --cpu 0 --spin-us forever --json |
                json calls_per_s p50_ns p99_ns server_cpu_ns_per_call)" >>"$results"
        done
        for c in $(windows "$round" "1 64"); do
            echo "$round $transport-tasks $c $("$ll" bench "$uri" --tasks "$c" --calls $((n / 3)) --cpu 0 --json |
                json calls_per_s p50_ns p999_ns none longest_run)" >>"$results"
        done
        ll_stop
    done
    for scheme in tcp onc+udp onc+tcp; do
        next_port
        uri="$scheme://127.0.0.1:$port"
        serve serve "$uri"
        for w in $(windows "$round" "1 16"); do
            echo "$round $scheme-rpc $w $("$ll" bench "$uri" --in-flight "$w" --calls $((calls / 10)) --cpu 0 --spin-us forever --json |
                json calls_per_s p50_ns p99_ns server_cpu_ns_per_call)" >>"$results"
        done
        ll_stop
    done
done
cat "$results"
echo "medians over $rounds rounds: WHAT W RATE_PER_S P50_NS P99_NS SERVER_CPU_NS CLIENT_CPU_NS|LONGEST_RUN"
python3 - "$results" <<'EOF'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    f = line.split()
    rows.setdefault((f[1], int(f[2])), []).append([float(x) for x in f[3:]])
for (what, w), rs in rows.items():
    med = [statistics.median(c) for c in zip(*rs)]
    print(what, w, " ".join(f"{m:.0f}" for m in med))
EOF
