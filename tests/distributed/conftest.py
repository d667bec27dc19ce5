"""Distributed tests spawn Gloo ranks on this CPU; they need torch (the ``bench`` extra)."""

import pytest

pytest.importorskip("torch", reason="torch is not installed: pip install 'willitscale[bench]'")


@pytest.fixture(autouse=True)
def _collective_timeout(monkeypatch):
    """A rank stuck in a collective fails the test in 5 minutes: the launcher's progress
    timeout (WILLITSCALE_TIMEOUT_S; ranks inherit it), set here so that a larger value in the
    environment of the test run cannot lengthen it. The slowest wait here is a rank waiting for
    its peers to start and import torch: seconds, tens on a busy machine (and a rank still
    starting is judged by its heartbeat, not its progress)."""
    from willitscale.bench.ranks.dist import TIMEOUT_ENV

    monkeypatch.setenv(TIMEOUT_ENV, "300")
