#!/usr/bin/env bash
# Installs the Debian packages the peer systems (peers/) are built from: gRPC C++, ZeroMQ and
# rpcgen/libtirpc. Idempotent: installs only what is missing, runs `apt-get update` at most once.
set -euo pipefail

pkgs=(
    g++ pkg-config
    libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
    libzmq3-dev
    rpcsvc-proto libtirpc-dev
)

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "peers.sh: all packages present"
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
# Other jobs on the machine may hold the dpkg lock; wait for it rather than fail.
apt_opts=(-o DPkg::Lock::Timeout=300)
echo "peers.sh: installing ${missing[*]}"
if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"; then
    $sudo apt-get "${apt_opts[@]}" update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"
fi
