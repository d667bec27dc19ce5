"""Distributed tests spawn Gloo ranks on this CPU; they need torch (the ``bench`` extra)."""

import pytest

pytest.importorskip("torch", reason="torch is not installed: pip install 'willitscale[bench]'")


@pytest.fixture(autouse=True)
def _collective_timeout(monkeypatch):
    """A rank stuck in a collective fails the test in minutes, not after torch's 30 minutes
    (WILLITSCALE_TIMEOUT_S; ranks inherit it). The slowest wait here is a rank waiting for its
    peers to start and import torch: seconds, tens on a busy machine."""
    from willitscale.bench.dist import TIMEOUT_ENV

    monkeypatch.setenv(TIMEOUT_ENV, "300")
