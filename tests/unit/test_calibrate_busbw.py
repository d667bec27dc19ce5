"""The prediction drawn next to a measured collective sweep (``bench collectives --plot``,
``results show --plot``): calibration first, then the catalog, then an emulated uplink."""

from __future__ import annotations

import pytest

from willitscale.calibrate.busbw import POINTS_PER_OCTAVE, predicted_busbw, size_grid
from willitscale.calibrate.runs import run_from_environment
from willitscale.collectives.ops import Op
from willitscale.hardware.calibration import Calibration, LinkCalibration
from willitscale.results.records import CollectiveRow

MIB = 2**20


def _env(nodes, rpn, *, devices=("cpu",), backend="gloo", uplink=None):
    return {"world_size": nodes * rpn, "nodes": nodes, "ranks_per_node": rpn, "backend": backend,
            "devices": list(devices), "emulated": {"uplink_Bps": uplink} if uplink else None}


def _rows(sizes, ranks):
    return [CollectiveRow(op=Op.ALL_REDUCE, size_bytes=s, count=s // 4, dtype="float32",
                          redop="sum", root=-1, in_place=False, ranks=ranks, time=1e-3,
                          wrong=0).to_json() for s in sizes]


def _run(env, sizes=(MIB, 64 * MIB)):
    return run_from_environment(env, kind="collectives", rows=_rows(sizes, env["world_size"]))


def test_the_grid_spans_the_measured_sizes_log_spaced():
    grid = size_grid([MIB, 16 * MIB, 4 * MIB])
    # 1 MiB .. 16 MiB is 4 octaves: 4 x POINTS_PER_OCTAVE steps, both ends included
    assert len(grid) == 4 * POINTS_PER_OCTAVE + 1
    assert grid[0] == pytest.approx(MIB) and grid[-1] == pytest.approx(16 * MIB)
    assert grid[1] / grid[0] == pytest.approx(2 ** (1 / POINTS_PER_OCTAVE))


def test_a_calibration_that_fits_the_run_is_used():
    # 2 nodes x 1 rank, inter-node fit B = 23.5 MB/s, alpha = 1 ms. Ring all-reduce over n = 2:
    # t = 2(n-1) alpha + 2(n-1)/n S/B = 2 ms + S/B, busbw = S/t x 2(n-1)/n = S / (2 ms + S/B)
    cal = Calibration(links=(LinkCalibration(level="inter_node", bandwidth=23.5e6, latency=1e-3,
                                             backend="gloo", nominal_bandwidth=25e6, runs=(7,)),),
                      runs=(7,), path="cal.toml")
    pred = predicted_busbw(_run(_env(2, 1, uplink=25e6)), cal)
    assert pred.source == "calibration" and "cal.toml" in pred.note
    ((label, (sizes, bw)),) = pred.curves.items()
    assert "calibrated" in label
    for s, b in zip(sizes, bw):
        assert b == pytest.approx(s / (2e-3 + s / 23.5e6), rel=1e-9)


def test_a_calibration_of_another_setup_falls_back_and_says_why():
    # fitted on NCCL; this run used Gloo over a 25 MB/s shaped uplink, one rank per node: the
    # uplink model, t = 2(n-1)/n S/B with no latency, so busbw = B at every size
    cal = Calibration(links=(LinkCalibration(level="inter_node", bandwidth=1e9, latency=1e-5,
                                             backend="nccl"),))
    pred = predicted_busbw(_run(_env(2, 1, uplink=25e6)), cal)
    assert pred.source == "uplink" and "nccl" in pred.note
    ((label, (_, bw)),) = pred.curves.items()
    assert label == "all_reduce, shaped uplink 200 Mb/s (ring)"  # 25e6 B/s x 8 = 200 Mb/s
    assert all(b == pytest.approx(25e6, rel=1e-12) for b in bw)


def test_a_catalog_gpu_without_calibration_uses_its_node_preset():
    # "NVIDIA A100-SXM4-80GB" is the catalog's a100-80gb-sxm, in the dgx-a100-640gb preset:
    # NVLink 3, 12 links x 25 GB/s = 300 GB/s one direction, x 0.8 catalog efficiency = 240 GB/s,
    # 0.6 us per hop. Ring over 8 ranks at 1 GiB: t = 14 x 0.6 us + 1.75 x 2^30 / 240e9 =
    # 8.4 us + 7.83 ms, so busbw = 240 GB/s x 7.83 / (7.83 + 0.0084) = 239.7 GB/s
    env = _env(1, 8, devices=("NVIDIA A100-SXM4-80GB",), backend="nccl")
    pred = predicted_busbw(_run(env, sizes=(MIB, 2**30)), None)
    assert pred.source == "catalog" and "dgx-a100-640gb" in pred.note
    ((label, (sizes, bw)),) = pred.curves.items()
    assert "catalog dgx-a100-640gb" in label
    assert bw[-1] == pytest.approx(239.7e9, rel=1e-3)
    assert all(b <= 240e9 for b in bw)  # never above the link
    # latency weighs less as messages grow; within 1%: the model takes NCCL's preferred
    # algorithm among those within 1% of the fastest (collectives.choice.DEFAULT_TOLERANCE)
    assert all(b >= 0.99 * max(bw[:i + 1]) for i, b in enumerate(bw))


def test_nothing_to_predict_says_why():
    pred = predicted_busbw(_run(_env(1, 2)), None)
    assert pred.curves == {} and pred.source == ""
    assert "no calibration" in pred.note and "cpu is not a catalog GPU" in pred.note
