#!/usr/bin/env bash
# Debian packages lowlat's own build and tests use on every machine: iproute2 (network
# namespaces and veth pairs for the raw Ethernet tests), procps (kill, ps), rpcbind (ONC RPC
# registration tests). Idempotent: installs only what is missing; `apt-get update` only if needed.
set -euo pipefail

pkgs=(iproute2 procps rpcbind gcc libc6-dev pkg-config)

missing=()
for p in "${pkgs[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
        missing+=("$p")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    echo "base.sh: all packages present"
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
apt_opts=(-o DPkg::Lock::Timeout=300)
echo "base.sh: installing ${missing[*]}"
if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"; then
    $sudo apt-get "${apt_opts[@]}" update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends "${missing[@]}"
fi
