#!/usr/bin/env bash
# What the lowlat-idl tests need beyond Rust: rpcgen (rpcsvc-proto), libtirpc headers and a C
# compiler, for the byte-exact XDR interop test.
set -euo pipefail
source "$(dirname "$0")/../lib/apt.sh"
apt_install idl.sh rpcsvc-proto libtirpc-dev gcc libc6-dev
