"""Emulated-cluster tests need root, iproute2 (ip, tc), network namespaces and tbf."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest


def _probe() -> str | None:
    """Why an emulated cluster cannot be built here, or None if it can."""
    if shutil.which("ip") is None or shutil.which("tc") is None:
        return "needs ip and tc from iproute2 (scripts/test.sh installs them when root)"
    if os.geteuid() != 0:
        return "needs root to create network namespaces"
    ns = f"wis-{os.getpid()}-probe"
    try:
        made = subprocess.run(["ip", "netns", "add", ns], capture_output=True, text=True)
        if made.returncode != 0:
            return f"cannot create a network namespace: {made.stderr.strip()}"
        link = subprocess.run(["ip", "-n", ns, "link", "add", "p0", "type", "veth", "peer", "name", "p1"],
                              capture_output=True, text=True)
        if link.returncode != 0:
            return f"cannot create a veth pair: {link.stderr.strip()}"
        tbf = subprocess.run(["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "p0", "root",
                              "tbf", "rate", "100mbit", "burst", "128kb", "latency", "50ms"],
                             capture_output=True, text=True)
        if tbf.returncode != 0:
            return f"no tc tbf: {tbf.stderr.strip()}"
    finally:
        subprocess.run(["ip", "netns", "delete", ns], capture_output=True)
    return None


@pytest.fixture(scope="session")
def emulation_available():
    reason = _probe()
    if reason:
        pytest.skip(reason)


@pytest.fixture(autouse=True)
def _collective_timeout(monkeypatch):
    """A rank stuck in a collective fails the test in 5 minutes: the launchers' progress
    timeout (WILLITSCALE_TIMEOUT_S, inherited by the nodes' commands), set here so that a
    larger value in the environment of the test run cannot lengthen it. The slowest op here,
    4 MB over a 100 Mbit/s uplink, takes 0.3 s; a rank waiting for its peers to start, seconds."""
    from willitscale.bench.ranks.dist import TIMEOUT_ENV

    monkeypatch.setenv(TIMEOUT_ENV, "300")
