#!/usr/bin/env bash
# The Debian packages the peer systems (peers/) are built from: gRPC C++, ZeroMQ and
# rpcgen/libtirpc.
set -euo pipefail
source "$(dirname "$0")/../lib/apt.sh"
apt_install peers.sh \
    g++ pkg-config \
    libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler \
    libzmq3-dev \
    rpcsvc-proto libtirpc-dev
