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
    ('format = 2\n', "format"),
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
