"""The Calibration data type: validated, and its TOML round-trips exactly."""

from __future__ import annotations

import pytest

from willitscale.errors import ConfigError
from willitscale.hardware.calibration import (
    Calibration,
    ComputeCalibration,
    LinkCalibration,
    load_calibration,
)
from willitscale.hardware.profile import (
    AttentionCurve,
    GemmCurve,
    MemoryCurve,
    Provenance,
)


def _cal() -> Calibration:
    return Calibration(
        links=(LinkCalibration(level="inter_node", bandwidth=23.4e6, latency=125e-6, backend="gloo",
                               ranks=2, ranks_per_node=1, nominal_bandwidth=25e6, points=4,
                               rms_error=0.004, runs=(3,), device="cpu", nics_per_node=1),
               LinkCalibration(level="intra_node", bandwidth=1.2e9, latency=40e-6, runs=(4,))),
        compute=(ComputeCalibration(device="cpu", dtype="fp32", peak_flop_rate=110e9,
                                    peak_source="matmul run 5", achieved_flop_rate=44e9,
                                    optimizer_time_per_param=9.5e-9, model="gpt2-tiny", runs=(5, 6)),),
        created="2025-01-01T00:00:00+00:00", runs=(3, 4, 5, 6), setup="gloo, cpu", source="test")


def test_round_trip(tmp_path):
    cal = _cal()
    path = tmp_path / "cal.toml"
    path.write_text(cal.to_toml())
    back = load_calibration(path)
    assert back == cal
    assert back.path == str(path)


def test_a_measured_profile_round_trips(tmp_path):
    # format 2: provenance and the curve sections come back exactly, beside links and compute
    cal = _cal()
    profile = Calibration(
        links=cal.links, compute=cal.compute, created=cal.created, runs=cal.runs, setup=cal.setup,
        source=cal.source,
        provenance=Provenance(gpu="h100-sxm", device="NVIDIA H100 80GB HBM3", driver="550.54.15",
                              cuda="12.4", torch="2.4.0", sm_clock_MHz=1980.0, date="2025-01-01",
                              host="node-17"),
        sections={"gemm": (GemmCurve(dtype="bf16", peak_flop_rate=989.4e12, efficiency=0.78,
                                     k_half=180.0, kernel_overhead=4e-6, points=12,
                                     rms_error=0.03, runs=(7,)),),
                  "attention": (AttentionCurve(kernel="fa3", direction="forward", causal=True,
                                               efficiency=0.64, seq_half=900.0),),
                  "memory": (MemoryCurve(bandwidth=2.9e12, kernel_overhead=2.5e-6),)})
    path = tmp_path / "profile.toml"
    path.write_text(profile.to_toml())
    assert path.read_text().splitlines()[2] == "format = 2"
    back = load_calibration(path)
    assert back == profile
    assert back.section("gemm")[0].k_half == 180.0 and back.section("memory")[0].bandwidth == 2.9e12
    assert cal.section("gemm") == ()


def test_the_documented_example_profile_loads():
    # examples/profiles/measured-profile.toml is the example of docs/measure.md ("The measured profile")
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    example = root / "examples" / "profiles" / "measured-profile.toml"
    cal = load_calibration(example)
    assert cal.provenance.gpu == "h100-sxm"
    assert {name for name in cal.sections} == {"gemm", "attention", "memory"}
    assert example.read_text() in (root / "docs" / "measure.md").read_text()


def test_lookups_and_derived_figures():
    cal = _cal()
    # 23.4 / 25 MB/s = 93.6% of the shaped rate; 44 / 110 GFLOP/s = 40% of peak
    assert cal.inter_node.efficiency == pytest.approx(0.936)
    assert cal.intra_node.efficiency is None
    assert cal.compute_for("fp32").efficiency == pytest.approx(0.4)
    assert cal.compute_efficiency == pytest.approx(0.4)
    assert cal.compute_for("bf16") is None
    with pytest.raises(ConfigError):
        cal.link("rack")


def test_hand_written_file_with_only_an_efficiency(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('[[compute]]\ndevice = "NVIDIA H100"\ndtype = "bf16"\npeak_TFLOPS = 989\n'
                    'efficiency = 0.5\n[[link]]\nlevel = "inter_node"\nbandwidth_GBps = 45\n'
                    'latency_us = 5\n')
    cal = load_calibration(path)
    assert cal.compute[0].achieved_flop_rate == pytest.approx(494.5e12)
    assert cal.inter_node.bandwidth == 45e9 and cal.inter_node.latency == pytest.approx(5e-6)


@pytest.mark.parametrize("text, message", [
    ('[[link]]\nlevel = "rack"\nbandwidth_GBps = 1\nlatency_us = 1\n', "level"),
    ('[[link]]\nlevel = "inter_node"\nbandwidth_GBps = -1\nlatency_us = 1\n', "bandwidth_GBps"),
    ('[[link]]\nlevel = "inter_node"\nbandwith_GBps = 1\nlatency_us = 1\n', "bandwidth_GBps"),
    ('[[compute]]\ndevice = "cpu"\ndtype = "fp32"\npeak_TFLOPS = 1\nachieved_TFLOPS = 0.5\n'
     'efficiency = 0.9\n', "efficiency"),
    ('format = 3\n', "format"),
    ('format = 1\n[[gemm]]\ndtype = "bf16"\npeak_TFLOPS = 989\nefficiency = 0.8\nk_half = 100\n',
     "unknown key 'gemm'"),
    ('format = 2\n[[gemmm]]\ndtype = "bf16"\n', "unknown key 'gemmm'"),
    ('format = 2\n[[gemm]]\ndtype = "bf16"\npeak_TFLOPS = 989\nefficiency = 1.2\nk_half = 100\n',
     "efficiency"),
    ('format = 2\n[[attention]]\nkernel = "fa3"\ndirection = "sideways"\ncausal = true\n'
     'efficiency = 0.6\nseq_half = 500\n', "direction"),
    ('format = 2\n[[memory]]\nachievable_GBps = 2900\n[[memory]]\nachievable_GBps = 2800\n',
     "one entry per key"),
    # issue 17: a hand-written efficiency of 1.6 was clamped to 1 without a word
    ('[[compute]]\ndevice = "cpu"\ndtype = "fp32"\npeak_TFLOPS = 1\nefficiency = 1.6\n',
     r"efficiency = 1.6 is not valid: expected a fraction of the peak in \(0, 1\]"),
    ('[[link]]\nlevel = "inter_node"\nbandwidth_GBps = 1\nlatency_us = 1\n'
     '[[link]]\nlevel = "inter_node"\nbandwidth_GBps = 2\nlatency_us = 1\n', "one entry per level"),
])
def test_bad_files_name_the_problem(tmp_path, text, message):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=message):
        load_calibration(path)
