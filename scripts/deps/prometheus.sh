#!/usr/bin/env bash
# Debian's prometheus (the server and promtool): the metrics tests start their own Prometheus,
# scraping a lowlat server under load, and check its exposition with `promtool check metrics`.
# The package's own service is not used (a test runs the binary with a configuration of its own).
set -euo pipefail
source "$(dirname "$0")/../lib/apt.sh"
apt_install prometheus.sh prometheus
