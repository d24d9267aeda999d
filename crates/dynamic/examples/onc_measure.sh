#!/usr/bin/env bash
# One run of the issue-6 matrix; servers on CPU 1, clients on CPU 0; each server stopped by PID.
# ONC_PEER: peers/build.sh's onc_peer; ONC_BENCH: cargo build --release -p lowlat-dynamic
# --example onc_bench. Prints "CLIENT->SERVER TRANSPORT SIZE {json}" lines.
set -u
P=${ONC_PEER:?set ONC_PEER to the onc_peer that peers/build.sh built}
L=${ONC_BENCH:?set ONC_BENCH to target/release/examples/onc_bench}
N=${N:-10000}
port=31000
start() { # log, cmd...
  local log=$1; shift
  "$@" >"$log" 2>&1 &
  spid=$!
  for _ in $(seq 100); do grep -qx ready "$log" && return 0; sleep 0.05; done
  echo "server did not start: $(cat $log)" >&2
}
spid=""
stop() { [ -n "$spid" ] && kill $spid 2>/dev/null; [ -n "$spid" ] && wait $spid 2>/dev/null; spid=""; }
# A client that fails or a reader that goes away must not leave a server behind.
trap stop EXIT
for t in udp tcp; do
  for size in 0 1440; do
    port=$((port+1))
    start /tmp/onc-m.log $P --serve $t://127.0.0.1:$port --cpu 1
    echo "rpcgen->rpcgen $t $size $($P --connect $t://127.0.0.1:$port --calls $N --size $size --cpu 0)"
    echo "lowlat->rpcgen $t $size $($L call onc+$t://127.0.0.1:$port --calls $N --size $size --cpu 0)"
    stop
    port=$((port+1))
    start /tmp/onc-m.log $L serve --cpu 1 onc+$t://127.0.0.1:$port
    echo "rpcgen->lowlat $t $size $($P --connect $t://127.0.0.1:$port --calls $N --size $size --cpu 0)"
    echo "lowlat->lowlat $t $size $($L call onc+$t://127.0.0.1:$port --calls $N --size $size --cpu 0)"
    stop
  done
done
for size in 0 1440; do
  port=$((port+1))
  start /tmp/onc-m.log $L serve --cpu 1 udp://127.0.0.1:$port
  echo "lowlat-own udp $size $($L call udp://127.0.0.1:$port --calls $N --size $size --cpu 0)"
  stop
done
