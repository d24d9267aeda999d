#!/usr/bin/env bash
# Installs Debian's chromium (used headless to screenshot report.html in tests) if it is missing.
set -euo pipefail

if command -v chromium >/dev/null 2>&1; then
    echo "chromium.sh: chromium present"
    exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
apt_opts=(-o DPkg::Lock::Timeout=300)
if ! $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends chromium; then
    $sudo apt-get "${apt_opts[@]}" update
    $sudo env DEBIAN_FRONTEND=noninteractive apt-get "${apt_opts[@]}" install -y --no-install-recommends chromium
fi
