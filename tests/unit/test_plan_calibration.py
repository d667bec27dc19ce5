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


# -- scope: which node a calibration describes (review P5) ----------------------------------

def _cal(tmp_path, link: str, compute: str = "") -> str:
    path = tmp_path / "cal.toml"
    path.write_text("format = 1\nsetup = \"test\"\n[[link]]\nlevel = \"inter_node\"\n" + link
                    + ("\n[[compute]]\n" + compute if compute else ""))
    return str(path)


def _links(path, preset="dgx-a100", nodes=2):
    from willitscale.collectives.lines import cluster_links
    from willitscale.scenario.build import build_scenario

    return cluster_links(build_scenario({"params": 1e9, "preset": preset, "nodes": nodes,
                                         "seq_len": 1024, "calibration": path}))


def test_a_one_rank_per_node_fit_is_one_nic_of_an_eight_nic_node(tmp_path):
    # One rank per node drives one NIC (NCCL gives each GPU its nearest): a 10 GB/s fit is one
    # NIC's worth. A DGX A100 node has 8 NICs: 8 x 10 = 80 GB/s per node. (Before: the fit was
    # taken as the whole node's and then shared by 8 DP groups, 1/8 each: 8x pessimistic.)
    one = _cal(tmp_path, "bandwidth_GBps = 10.0\nlatency_us = 0\nranks_per_node = 1\n")
    assert _links(one).inter_bandwidth == pytest.approx(80e9)
    # eight ranks per node drove all 8 NICs: the fit is the node's
    eight = _cal(tmp_path, "bandwidth_GBps = 80.0\nlatency_us = 0\nranks_per_node = 8\n")
    assert _links(eight).inter_bandwidth == pytest.approx(80e9)
    # measured nodes with one uplink (the emulated cluster): a rank per node already filled
    # it; applied to a one-NIC node it stays 10 GB/s, to an 8-NIC node it is 8 NICs of 10
    single = _cal(tmp_path, "bandwidth_GBps = 10.0\nlatency_us = 0\nranks_per_node = 2\n"
                            "nics_per_node = 1\n")
    assert _links(single).inter_bandwidth == pytest.approx(80e9)


def test_a_gloo_cpu_calibration_on_a_dgx_cluster_warns_loudly(cli, tmp_path):
    # the reviewer's case: an emulated Gloo/CPU calibration applied to --preset dgx-a100
    path = _cal(tmp_path, 'bandwidth_GBps = 0.0237\nlatency_us = 812.5\nbackend = "gloo"\n'
                          'ranks_per_node = 1\ndevice = "cpu"\nnics_per_node = 1\n',
                'device = "cpu"\ndtype = "fp32"\npeak_TFLOPS = 0.11\nefficiency = 0.4\n')
    args = ("estimate", "--model", "gpt2", "--preset", "dgx-a100", "--nodes", "2",
            "--micro-batch", "1", "--json", "--calibration", path)
    code, out, _ = cli(*args)
    est = json.loads(out)
    text = " | ".join(est["warnings"])
    assert code == 0
    assert "measured with gloo" in text and "NCCL" in text
    assert "measured on cpu" in text and "A100" in text
    assert "1 NIC(s), this cluster's have 8" in text
    assert "measured in fp32, applied to bf16" in text
    assumptions = {a["what"]: a["value"] for a in est["assumptions"]}
    assert "23.7 MB/s per NIC x 8 NIC(s) = 190 MB/s per node" in assumptions[
        "calibrated inter-node bandwidth"]
    code, out, _ = cli(*args[:-3], "--calibration", path)  # text output says it too
    assert "warning: the calibration's inter-node fit was measured with gloo" in out.replace("\n", " ")


def test_a_calibration_of_this_hardware_has_no_warning(cli, tmp_path):
    path = _cal(tmp_path, 'bandwidth_GBps = 20.0\nlatency_us = 5\nbackend = "nccl"\n'
                          'ranks_per_node = 1\ndevice = "NVIDIA A100-SXM4-80GB"\nnics_per_node = 8\n',
                'device = "NVIDIA A100-SXM4-80GB"\ndtype = "bf16"\npeak_TFLOPS = 312\n'
                'efficiency = 0.5\n')
    code, out, _ = cli("estimate", "--model", "gpt2", "--preset", "dgx-a100", "--nodes", "2",
                       "--micro-batch", "1", "--json", "--calibration", path)
    est = json.loads(out)
    assert code == 0 and not [w for w in est["warnings"] if "calibrat" in w]
    code, out, _ = cli("plan", "--model", "gpt2", "--preset", "dgx-a100", "--gpus", "16",
                       "--global-batch", "16", "--json", "--calibration", path)
    assert code == 0 and json.loads(out)["warnings"] == []
