#!/bin/sh
# Two network namespaces joined by a veth pair, for trying eth:// and xdp:// by hand.
#
#   scripts/testhosts.sh up [MTU]      create lowlat-sh-a (10.77.250.1, llsha) and lowlat-sh-b
#                                      (10.77.250.2, llshb); prints both MACs
#   scripts/testhosts.sh down          delete both (and with them the veth pair and any XDP program)
#   scripts/testhosts.sh exec a|b CMD  run CMD inside namespace a or b
#   scripts/testhosts.sh sweep         delete leftovers of dead test runs (lowlat-PID-N-a|b)
#
# Example:
#   scripts/testhosts.sh up
#   scripts/testhosts.sh exec a lowlat serve eth://llsha &
#   scripts/testhosts.sh exec b lowlat call eth://llshb NULL
#   scripts/testhosts.sh down
set -eu

A=lowlat-sh-a B=lowlat-sh-b IFA=llsha IFB=llshb

need_root() {
    [ "$(id -u)" = 0 ] || { echo "testhosts.sh: needs root (network namespaces, veth)" >&2; exit 1; }
}

mac() { ip -n "$1" -o link show dev "$2" | sed -n 's/.*link\/ether \([0-9a-f:]*\).*/\1/p'; }

case "${1:-}" in
up)
    need_root
    mtu=${2:-1500}
    ip netns add $A
    ip netns add $B
    # Created inside the namespaces: the pair never appears in the root namespace.
    ip link add $IFA netns $A mtu "$mtu" numtxqueues 1 numrxqueues 1 type veth \
        peer name $IFB netns $B mtu "$mtu" numtxqueues 1 numrxqueues 1
    for side in "$A $IFA 10.77.250.1" "$B $IFB 10.77.250.2"; do
        set -- $side
        ip netns exec "$1" sysctl -qw net.ipv6.conf.all.disable_ipv6=1 net.ipv6.conf.default.disable_ipv6=1
        ip -n "$1" addr add "$3/24" dev "$2"
        ip -n "$1" link set dev lo up
        ip -n "$1" link set dev "$2" up
        echo "$1: $2 $3 $(mac "$1" "$2")"
    done
    ;;
down)
    need_root
    ip netns del $A 2>/dev/null || true
    ip netns del $B 2>/dev/null || true
    ;;
exec)
    need_root
    [ $# -ge 3 ] || { echo "usage: $0 exec a|b CMD [ARG...]" >&2; exit 2; }
    case "$2" in a) ns=$A ;; b) ns=$B ;; *) echo "side must be a or b" >&2; exit 2 ;; esac
    shift 2
    exec ip netns exec "$ns" "$@"
    ;;
sweep)
    need_root
    for ns in $(ip netns list | sed -n 's/^\(lowlat-[0-9]*-[0-9]*-[ab]\).*/\1/p'); do
        pid=$(echo "$ns" | cut -d- -f2)
        [ -d "/proc/$pid" ] || { ip netns del "$ns" && echo "removed $ns"; }
    done
    ;;
*)
    sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
    ;;
esac
