#!/usr/bin/env bash
# Sets up everything the test suite needs, then runs it: `bash scripts/test.sh [pytest args]`.
# Safe to rerun. System packages (iproute2 for the emulated cluster, python3-simgrid for the
# fabric cross-check, chromium for the HTML report test) are installed only when running as
# root with apt; without them those tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."

apt_packages=()
command -v ip >/dev/null 2>&1 && command -v tc >/dev/null 2>&1 || apt_packages+=(iproute2)
command -v chromium >/dev/null 2>&1 || apt_packages+=(chromium)
# SimGrid's Python bindings for Debian's python3: the fabric simulator's cross-check
/usr/bin/python3 -c "import simgrid" >/dev/null 2>&1 || apt_packages+=(python3-simgrid)
if [ "${#apt_packages[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${apt_packages[*]}"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${apt_packages[@]}" >/dev/null
fi

python3 -m venv .venv
# torch 2.13.0 is the CPU build this machine keeps on disk; other versions download gigabytes.
.venv/bin/pip install -q --disable-pip-version-check torch==2.13.0
# parquet and ray: the optional extras of `willitscale sweep` (tests/unit/test_sweep*.py)
.venv/bin/pip install -q --disable-pip-version-check -e '.[test,plot,parquet,ray]'
exec .venv/bin/python -m pytest "$@"
