"""A calibration file replaces the compute efficiency, the optimizer time and the fitted links.

Skipped until ``willitscale.hardware.calibration`` (the bench helper's module) is merged.
"""

import json

import pytest

pytest.importorskip("willitscale.hardware.calibration")

CALIBRATION = """
format = 1
[[link]]
level = "inter_node"
bandwidth_GBps = 10.0
latency_us = 0
[[compute]]
device = "NVIDIA A100-SXM4-80GB"
dtype = "bf16"
peak_TFLOPS = 312
efficiency = 0.25
optimizer_ns_per_param = 20
"""

FLAGS = ["estimate", "--params", "1e9", "--gpu", "a100-80gb", "--nodes", "2", "--gpus-per-node", "1",
         "--micro-batch", "4", "--seq-len", "1024", "--json", "--no-overlap"]


def test_calibration_replaces_efficiency_optimizer_and_link(cli, tmp_path):
    path = tmp_path / "cal.toml"
    path.write_text(CALIBRATION)
    code, out, err = cli(*FLAGS, "--calibration", str(path))
    assert code == 0, err
    d = json.loads(out)
    # compute at the calibrated HFU 0.25: 6 x 1e9 x 4096 / (0.25 x 312e12) = 0.31508 s
    assert d["compute_s"] == pytest.approx(6e9 * 4096 / (0.25 * 312e12))
    # optimizer: 20 ns per parameter x 1e9 = 20 s
    assert d["breakdown_s"]["optimizer_s"] == pytest.approx(20.0)
    # 2 nodes x 1 GPU, 4e9 B of fp32 gradients: ring across 2 ranks sends 2 x 1/2 x 4e9 = 4e9 B
    # through each node's fitted 10 GB/s, zero latency: 0.4 s
    assert d["comms_s"] == pytest.approx(0.4, rel=1e-6)


def test_explicit_efficiency_wins_over_the_calibration(cli, tmp_path):
    path = tmp_path / "cal.toml"
    path.write_text(CALIBRATION)
    code, out, _ = cli(*FLAGS, "--calibration", str(path), "--hfu", "0.5")
    assert code == 0
    assert json.loads(out)["compute_s"] == pytest.approx(6e9 * 4096 / (0.5 * 312e12))
