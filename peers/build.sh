#!/usr/bin/env bash
# Builds every peer system into OUTDIR: the C and C++ ones from the Debian packages
# scripts/deps/peers.sh installs, the iceoryx2 one with cargo from crates.io (its Cargo.lock
# committed; compiled in peers/iceoryx2/target, so later builds are incremental).
#
# A peer whose tools or libraries are missing, or whose build fails, is skipped with the reason
# printed; the script still exits 0. Outputs in OUTDIR:
#   grpc_peer, zmq_peer, onc_peer,  the programs that were built
#   iceoryx2_peer
#   peers.txt                       one line per runnable setup: SYSTEM TRANSPORT PROGRAM ADDRESS
#                                   (ADDRESS has {port} or {dir} to fill in; the client --connect
#                                   and the server --serve take the same address)
#   skipped.txt                     one `name: reason` line per peer not built (empty if none)
#   logs/NAME.log                   compiler output
set -uo pipefail

if [ $# -ne 1 ]; then
    echo "usage: $0 OUTDIR" >&2
    exit 2
fi
here="$(cd "$(dirname "$0")" && pwd)"
mkdir -p "$1" || exit 1
out="$(cd "$1" && pwd)"
mkdir -p "$out/logs" "$out/gen"
: >"$out/skipped.txt"
: >"$out/peers.txt"

CFLAGS="-O2 -g -Wall -Wextra"

skip() {
    echo "peers: skipping $1: $2" >&2
    echo "$1: $2" >>"$out/skipped.txt"
}

need_cmd() {
    command -v "$1" >/dev/null 2>&1
}

need_pkg() {
    pkg-config --exists "$@" 2>/dev/null
}

build_grpc() {
    local gen="$out/gen/grpc" log="$out/logs/grpc.log"
    if ! need_cmd g++; then skip grpc "g++ not installed"; return; fi
    if ! need_cmd protoc; then skip grpc "protoc not installed (protobuf-compiler)"; return; fi
    if ! need_cmd grpc_cpp_plugin; then
        skip grpc "grpc_cpp_plugin not installed (protobuf-compiler-grpc)"; return
    fi
    if ! need_cmd pkg-config || ! need_pkg grpc++ protobuf; then
        skip grpc "grpc++/protobuf libraries not found by pkg-config (libgrpc++-dev, libprotobuf-dev)"
        return
    fi
    mkdir -p "$gen"
    if ! {
        protoc -I "$here/grpc" --cpp_out="$gen" --grpc_out="$gen" \
            --plugin=protoc-gen-grpc="$(command -v grpc_cpp_plugin)" "$here/grpc/peer.proto" &&
            g++ $CFLAGS -std=c++17 -I "$here" -I "$gen" -o "$out/grpc_peer" \
                "$here/grpc/grpc_peer.cc" "$gen/peer.pb.cc" "$gen/peer.grpc.pb.cc" \
                $(pkg-config --cflags --libs grpc++ protobuf)
    } >"$log" 2>&1; then
        skip grpc "build failed, see $log"
        return
    fi
    echo "grpc tcp grpc_peer tcp://127.0.0.1:{port}" >>"$out/peers.txt"
    echo "peers: built grpc_peer" >&2
}

build_zmq() {
    local log="$out/logs/zeromq.log"
    if ! need_cmd gcc; then skip zeromq "gcc not installed"; return; fi
    if ! need_cmd pkg-config || ! need_pkg libzmq; then
        skip zeromq "libzmq not found by pkg-config (libzmq3-dev)"; return
    fi
    if ! gcc $CFLAGS -I "$here" -o "$out/zmq_peer" "$here/zmq_peer.c" \
        $(pkg-config --cflags --libs libzmq) >"$log" 2>&1; then
        skip zeromq "build failed, see $log"
        return
    fi
    echo "zeromq tcp zmq_peer tcp://127.0.0.1:{port}" >>"$out/peers.txt"
    echo "zeromq ipc zmq_peer ipc://{dir}/zmq-peer.sock" >>"$out/peers.txt"
    echo "peers: built zmq_peer" >&2
}

build_onc() {
    local gen="$out/gen/onc" log="$out/logs/rpcgen.log"
    if ! need_cmd gcc; then skip rpcgen "gcc not installed"; return; fi
    if ! need_cmd rpcgen; then skip rpcgen "rpcgen not installed (rpcsvc-proto)"; return; fi
    if ! need_cmd pkg-config || ! need_pkg libtirpc; then
        skip rpcgen "libtirpc not found by pkg-config (libtirpc-dev)"; return
    fi
    mkdir -p "$gen"
    cp "$here/onc/peer.x" "$gen/peer.x"
    # rpcgen writes #include "peer.h" into its output, so it runs beside its input.
    if ! (
        cd "$gen" &&
            rm -f peer.h peer_xdr.c peer_clnt.c peer_svc.c &&
            rpcgen -h -o peer.h peer.x &&
            rpcgen -c -o peer_xdr.c peer.x &&
            rpcgen -l -o peer_clnt.c peer.x &&
            rpcgen -m -o peer_svc.c peer.x &&
            # libtirpc's xdrproc_t casts trip -Wcast-function-type; that is its API, not a bug here.
            gcc $CFLAGS -Wno-cast-function-type -I "$here" -I "$gen" \
                $(pkg-config --cflags libtirpc) -c -o onc_peer.o "$here/onc/onc_peer.c" &&
            gcc -O2 -g -w -I "$gen" $(pkg-config --cflags libtirpc) -o "$out/onc_peer" \
                onc_peer.o peer_xdr.c peer_clnt.c peer_svc.c $(pkg-config --libs libtirpc)
    ) >"$log" 2>&1; then
        skip rpcgen "build failed, see $log"
        return
    fi
    echo "rpcgen udp onc_peer udp://127.0.0.1:{port}" >>"$out/peers.txt"
    echo "rpcgen tcp onc_peer tcp://127.0.0.1:{port}" >>"$out/peers.txt"
    echo "peers: built onc_peer" >&2
}

build_iceoryx2() {
    local log="$out/logs/iceoryx2.log"
    if ! need_cmd cargo; then skip iceoryx2 "cargo not installed"; return; fi
    if ! cargo build --release --locked --quiet --manifest-path "$here/iceoryx2/Cargo.toml" \
        --target-dir "$here/iceoryx2/target" >"$log" 2>&1 ||
        ! cp "$here/iceoryx2/target/release/iceoryx2_peer" "$out/iceoryx2_peer"; then
        skip iceoryx2 "build failed (it needs crates.io the first time), see $log"
        return
    fi
    # {port} only makes the service name unique per run.
    echo "iceoryx2 shm iceoryx2_peer iox2://lowlat-peer-{port}" >>"$out/peers.txt"
    echo "peers: built iceoryx2_peer" >&2
}

build_grpc
build_zmq
build_onc
build_iceoryx2
exit 0
