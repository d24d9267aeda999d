#!/usr/bin/env bash
# Wireshark's command-line tools for the dissector's tests (crates/cli/tests/wireshark.rs):
# tshark (which reads wireshark/lowlat.lua) and tcpdump (which makes the captures). Debian asks
# whether non-root users may capture (a setuid dumpcap); the answer is preseeded to "no" so the
# install never stops for a question. The tests capture as root, on loopback and in namespaces
# they create.
set -euo pipefail
source "$(dirname "$0")/../lib/apt.sh"
if ! dpkg-query -W -f='${Status}' tshark 2>/dev/null | grep -q 'install ok installed'; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
    echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections
fi
apt_install wireshark.sh tshark tcpdump
