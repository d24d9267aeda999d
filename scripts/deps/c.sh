#!/usr/bin/env bash
# What the C library's tests need beyond Rust (crates/c): a C compiler with its sanitizer
# runtimes (the generated decoders run under AddressSanitizer), pkg-config (lowlat.pc) and
# valgrind (memcheck over a C client and a C server; callgrind counts the call path's instructions).
set -euo pipefail
source "$(dirname "$0")/../lib/apt.sh"
apt_install c.sh gcc libc6-dev pkg-config valgrind
