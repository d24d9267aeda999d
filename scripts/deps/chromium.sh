#!/usr/bin/env bash
# Debian's chromium, used headless to screenshot report.html in tests.
set -euo pipefail
source "$(dirname "$0")/../lib/apt.sh"
apt_install chromium.sh chromium
