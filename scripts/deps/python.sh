#!/usr/bin/env bash
# The lowlat Python package and what its tests need: a virtual environment at target/venv (so
# neither an externally managed system Python nor the user's own packages are touched; it sees
# the interpreter's site packages, so a pytest already installed there counts), maturin and
# pytest from PyPI if missing (PIP_FIND_LINKS may point at local wheels), then
# `pip install ./python` (built with the workspace's test-release profile; quick when nothing
# changed). Python 3.10 or newer: $LOWLAT_PYTHON, else python3.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
python="${LOWLAT_PYTHON:-python3}"
if ! command -v "$python" >/dev/null 2>&1; then
    source "$root/scripts/lib/apt.sh"
    apt_install python.sh python3 python3-venv python3-pip
    python=python3
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "python.sh: $("$python" --version 2>&1) is too old; lowlat's Python package needs 3.10 or newer" >&2
    exit 1
fi
venv="$root/target/venv"
if [ ! -x "$venv/bin/python" ]; then
    "$python" -m venv --system-site-packages "$venv" || {
        source "$root/scripts/lib/apt.sh"
        apt_install python.sh python3-venv
        "$python" -m venv --system-site-packages "$venv"
    }
fi
vpy="$venv/bin/python"
missing=()
"$vpy" -c 'import maturin' 2>/dev/null || missing+=("maturin>=1.7,<2")
"$vpy" -c 'import pytest' 2>/dev/null || missing+=("pytest>=7")
if [ ${#missing[@]} -gt 0 ]; then
    echo "python.sh: installing ${missing[*]}"
    "$vpy" -m pip install --quiet --disable-pip-version-check "${missing[@]}"
fi
echo "python.sh: building and installing the lowlat package into $venv"
# maturin's build backend runs the `maturin` command: the one in the environment, which is not on
# the PATH of a shell that never activated it (a fresh machine's).
PATH="$venv/bin:$PATH" "$vpy" -m pip install --quiet --disable-pip-version-check --no-build-isolation "$root/python"
