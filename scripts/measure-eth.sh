#!/usr/bin/env bash
# Raw Ethernet figures in one run, across a veth pair between two network namespaces (as root):
# raw ping-pong and null call p50/p99 for UDP, eth and xdp with 32-byte and 1 KiB frames, the
# XDP floor, what the CRC32C costs, and 1 MiB MAXRESULT throughput on each transport. Servers
# run in namespace a pinned to CPU 1, clients in namespace b pinned to CPU 0; all busy-polling.
#   scripts/measure-eth.sh [CALLS]
set -euo pipefail
cd "$(dirname "$0")/.."
[ "$(id -u)" = 0 ] || { echo "measure-eth.sh: needs root (network namespaces, raw sockets, XDP)" >&2; exit 1; }
calls="${1:-50000}"
cargo build --release -q -p lowlat-cli
ll=$PWD/target/release/lowlat
source scripts/lib/testhost-servers.sh
mac=$MAC_A
start() { ns_start "$ll" "$@"; }
cleanup() { ns_stop; }
in_b() { ip netns exec lowlat-sh-b "$ll" "$@" --cpu 0 --json; }
p50_p99() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%8.2f %8.2f" % (d["p50_ns"]/1e3, d["p99_ns"]/1e3))'; }
mbit() { python3 -c 'import json,sys; d=json.loads(sys.stdin.read()); print("%8.0f Mbit/s (%d calls, p50 %.0f µs)" % (d["mbit_s"], d["calls"], d["p50_ns"]/1e3))'; }

declare -A uri=([udp]="udp://10.77.250.1:7911" [eth]="eth://llshb/$mac" [xdp]="xdp://llshb/$mac")
declare -A bind=([udp]="udp://10.77.250.1:7911" [eth]="eth://llsha" [xdp]="xdp://llsha")
echo "transport  frame |   raw p50  raw p99 |   rpc p50  rpc p99 | rpc/raw"
row() { # name size raw-json rpc-json
    python3 -c 'import json,sys
r, c = json.loads(sys.argv[3]), json.loads(sys.argv[4])
print("%-9s %6s | %8.2f %8.2f | %8.2f %8.2f | %6.2fx" % (sys.argv[1], sys.argv[2], r["p50_ns"]/1e3, r["p99_ns"]/1e3,
      c["p50_ns"]/1e3, c["p99_ns"]/1e3, c["p50_ns"]/r["p50_ns"]))' "$@"
}
for t in udp eth xdp; do
    start pingpong --serve "${bind[$t]}" --spin-us forever
    r32=$(in_b pingpong "${uri[$t]}" --size 32 --calls "$calls" --spin-us forever)
    r1k=$(in_b pingpong "${uri[$t]}" --size 1024 --calls "$calls" --spin-us forever)
    cleanup
    start serve "${bind[$t]}" --spin-us forever
    c32=$(in_b bench "${uri[$t]}" --proc null --calls "$calls" --spin-us forever)
    # 32-byte header + 992 bytes of argument = the 1 KiB raw frame's payload.
    c1k=$(in_b bench "${uri[$t]}" --proc echo --size 992 --calls "$calls" --spin-us forever)
    row "$t" 32 "$r32" "$c32"
    row "$t" 1024 "$r1k" "$c1k"
    cleanup
done
start pingpong --serve --floor xdp://llsha
for size in 32 1024; do
    echo "xdp-floor $(printf '%6s' $size) | $(in_b pingpong --floor "xdp://llshb/$mac" --size $size --calls "$calls" --spin-us forever | p50_p99) |"
done
cleanup

echo
echo "CRC32C cost (eth, 32 B and 1 KiB frames; p50 p99 µs)"
for crc in on off; do
    flag=$([ $crc = off ] && echo --no-checksum || true)
    start pingpong --serve eth://llsha --spin-us forever $flag
    echo "raw   32 B, checksum $crc: $(in_b pingpong "${uri[eth]}" --size 32 --calls "$calls" --spin-us forever $flag | p50_p99)"
    echo "raw 1024 B, checksum $crc: $(in_b pingpong "${uri[eth]}" --size 1024 --calls "$calls" --spin-us forever $flag | p50_p99)"
    cleanup
    start serve eth://llsha --spin-us forever $flag
    echo "null call, checksum $crc:  $(in_b bench "${uri[eth]}" --calls "$calls" --spin-us forever $flag | p50_p99)"
    cleanup
done

echo
echo "1 MiB MAXRESULT throughput"
for t in udp eth xdp; do
    start serve "${bind[$t]}" --spin-us forever
    echo "$t: $(in_b bench "${uri[$t]}" --proc maxresult --size 1048576 --calls 200 --warmup 10 --spin-us forever | mbit)"
    cleanup
done
