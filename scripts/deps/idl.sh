#!/usr/bin/env bash
# Installs what the lowlat-idl tests need beyond Rust: rpcgen (rpcsvc-proto), libtirpc headers and
# a C compiler, for the byte-exact XDR interop test. Idempotent: installs only what is missing and
# runs `apt-get update` at most once, and only if an install without it fails.
set -euo pipefail

pkgs=(rpcsvc-proto libtirpc-dev gcc libc6-dev)

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "idl.sh: all packages present"
    exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
# Other jobs on the machine may hold the dpkg lock; wait for it rather than fail.
apt_opts=(-o DPkg::Lock::Timeout=300)
echo "idl.sh: installing ${missing[*]}"
if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"; then
    $sudo apt-get "${apt_opts[@]}" update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"
fi
