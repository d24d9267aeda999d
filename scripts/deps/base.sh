#!/usr/bin/env bash
# Debian packages lowlat's own build and tests use on every machine: iproute2 (network
# namespaces and veth pairs for the raw Ethernet tests), procps (kill, ps), rpcbind (ONC RPC
# registration tests), a C toolchain and pkg-config.
set -euo pipefail
source "$(dirname "$0")/../lib/apt.sh"
apt_install base.sh iproute2 procps rpcbind gcc libc6-dev pkg-config
