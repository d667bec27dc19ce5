"""Shared data for the report tests: the handbook scenario (seeds/000) as settings."""

from __future__ import annotations

import pytest

#: seeds/000's multi-node case: 2e9 parameters, 8 x A100 80GB per node, 200 Gb/s per node,
#: 2 x 2048 tokens per GPU, full recomputation, HFU 0.5 (the acceptance invocation's flags)
HANDBOOK = {"params": 2e9, "gpu": "a100-80gb", "gpus_per_node": 8, "inter_node": "200Gbps",
            "micro_batch": 2, "seq_len": 2048, "hfu": 0.5, "recompute": "full"}

ACCEPTANCE_FLAGS = ("--params", "2e9", "--gpu", "a100-80gb", "--nodes", "4", "--gpus-per-node",
                    "8", "--inter-node", "200Gbps", "--micro-batch", "2", "--seq-len", "2048",
                    "--hfu", "0.5", "--recompute", "full")


@pytest.fixture(scope="session")
def acceptance_flags() -> tuple[str, ...]:
    return ACCEPTANCE_FLAGS


@pytest.fixture(scope="session")
def scenario_flags() -> tuple[str, ...]:
    """The acceptance flags without ``--nodes`` (for sweeps)."""
    i = ACCEPTANCE_FLAGS.index("--nodes")
    return ACCEPTANCE_FLAGS[:i] + ACCEPTANCE_FLAGS[i + 2:]


@pytest.fixture(scope="session")
def handbook_estimates():
    """Estimates of the handbook job on 1, 2, 4, 8 and 16 nodes (computed once)."""
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario

    return [estimate(build_scenario({**HANDBOOK, "nodes": n})) for n in (1, 2, 4, 8, 16)]


@pytest.fixture(scope="session")
def acceptance_html(tmp_path_factory):
    """The acceptance report, written once per session by the CLI in-process."""
    from willitscale.cli.main import main

    path = tmp_path_factory.mktemp("report") / "out.html"
    code = main(["report", *ACCEPTANCE_FLAGS, "--html", str(path)])
    assert code == 0
    return path
