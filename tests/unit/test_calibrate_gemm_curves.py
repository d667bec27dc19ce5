"""``calibrate`` fits the measured profile's [[gemm]] curves to ``bench matmul`` sweeps.

The sweep here is synthetic: product times made by the GEMM model itself from a curve with
known constants (efficiency 0.6, k_half 600, 8 us per call), so the fit must recover them; a
profile of it round-trips through TOML and replaces the built-in curve in an estimate."""

from dataclasses import replace

import pytest

from willitscale.calibrate.build import calibrate
from willitscale.calibrate.runs import MeasuredRun
from willitscale.compute.curves import gpu_curves
from willitscale.compute.gemm import gemm_time
from willitscale.estimation.estimate import estimate
from willitscale.hardware.calibration import Calibration, load_calibration
from willitscale.hardware.catalog import get_gpu
from willitscale.results.records import MatmulRow
from willitscale.scenario.build import build_scenario

DEVICE = "NVIDIA H100 80GB HBM3"
SHAPES = [(512, 512, 512), (1024, 1024, 256), (2048, 2048, 2048), (4096, 4096, 4096),
          (8192, 8192, 1024), (8192, 4096, 8192)]


def _run(curve, bandwidth, shapes=SHAPES, device=DEVICE, run_id=1):
    rows = tuple(MatmulRow(m=m, n=n, k=k, dtype="bfloat16", device=device,
                           time=float(gemm_time(m, n, k, curve, bandwidth)))
                 for m, n, k in shapes)
    return MeasuredRun(id=run_id, kind="matmul", started_at="2026-01-01T00:00:00", backend="nccl",
                       ranks=1, nodes=1, ranks_per_node=1, devices=(device,), uplink=None, rows=rows)


@pytest.fixture(scope="module")
def truth():
    curves = gpu_curves(get_gpu("h100-sxm"))
    true = replace(curves.gemm_for("bf16"), efficiency=0.6, k_half=600.0, kernel_overhead=8e-6)
    return true, curves.memory.bandwidth


def test_the_fit_recovers_the_constants_of_the_sweep(truth):
    true, bw = truth
    cal, notes = calibrate([_run(true, bw)], created="now", gpu="h100-sxm")
    (fit,) = cal.section("gemm")
    assert cal.provenance.gpu == "h100-sxm" and cal.provenance.device == DEVICE
    assert fit.efficiency == pytest.approx(0.6, rel=1e-3)
    assert fit.k_half == pytest.approx(600.0, rel=1e-2)
    assert fit.kernel_overhead == pytest.approx(8e-6, rel=1e-2)
    assert fit.points == len(SHAPES) and fit.runs == (1,) and fit.rms_error < 1e-3


def test_one_shape_fixes_the_efficiency_only(truth):
    true, bw = truth
    cal, _ = calibrate([_run(true, bw, shapes=[(8192, 8192, 8192)])], created="now", gpu="h100-sxm")
    (fit,) = cal.section("gemm")
    start = gpu_curves(get_gpu("h100-sxm")).gemm_for("bf16")
    assert fit.k_half == start.k_half and fit.kernel_overhead == start.kernel_overhead
    assert "held" in fit.source


def test_the_profile_round_trips_and_replaces_the_builtin_curve(truth, tmp_path):
    true, bw = truth
    cal, _ = calibrate([_run(true, bw)], created="now", gpu="h100-sxm")
    path = tmp_path / "profile.toml"
    path.write_text(cal.to_toml())
    loaded = load_calibration(path)
    assert loaded.section("gemm")[0].efficiency == pytest.approx(cal.section("gemm")[0].efficiency)
    assert gpu_curves(get_gpu("h100-sxm"), loaded).measured == ("gemm bf16",)
    setting = {"model": "llama3-8b", "gpu": "h100-sxm", "gpus_per_node": 8, "zero": 3,
               "micro_batch": 1, "seq_len": 4096, "global_batch": 8}
    builtin = estimate(build_scenario(setting))
    measured = estimate(build_scenario({**setting, "calibration": str(path)}))
    # a slower measured GEMM (0.6 of peak, not the built-in ~0.9) makes the GEMMs slower
    assert measured.compute_kinds.gemm > 1.3 * builtin.compute_kinds.gemm
    assert measured.compute_kinds.attention == pytest.approx(builtin.compute_kinds.attention)


def test_cpu_runs_write_no_curve():
    row = MatmulRow(m=256, n=256, k=256, dtype="float32", device="cpu", time=1e-3)
    run = MeasuredRun(id=2, kind="matmul", started_at="x", backend="gloo", ranks=1, nodes=1,
                      ranks_per_node=1, devices=("cpu",), uplink=None, rows=(row,))
    cal, _ = calibrate([run], created="now")
    assert cal.section("gemm") == () and cal.provenance is None
    assert isinstance(cal, Calibration)


def _train_run(seconds: float, run_id=3):
    from willitscale.results.records import TrainRow

    row = TrainRow(model="gpt2-medium", layers=24, hidden=1024, heads=16, vocab=50257,
                   seq_len=1024, params=354_823_168, batch_per_rank=8, ranks=1, nodes=1,
                   dtype="bfloat16", bucket_bytes=25 * 2**20, device=DEVICE, step=2 * seconds,
                   forward=seconds / 3, backward=2 * seconds / 3, backward_no_sync=2 * seconds / 3,
                   optimizer=0.01, steps=5)
    return MeasuredRun(id=run_id, kind="train", started_at="x", backend="nccl", ranks=1, nodes=1,
                       ranks_per_node=1, devices=(DEVICE,), uplink=None, rows=(row,))


def test_a_train_step_fits_the_sustained_factor():
    # the measured step is the per-op model's own at factor 0.7 (built-in curves): the fit
    # must find 0.7 again, and a profile with it reproduces the step
    from willitscale.calibrate.profile_fit import _step_compute
    from willitscale.hardware.profile import Provenance, SustainedRate

    gpu = get_gpu("h100-sxm")
    truth = Calibration(provenance=Provenance(gpu="h100-sxm"),
                        sections={"sustained": (SustainedRate(factor=0.7),)})
    seconds = _step_compute(_train_run(1.0).rows[0], gpu, truth)
    cal, notes = calibrate([_train_run(seconds)], created="now", gpu="h100-sxm")
    (fit,) = cal.section("sustained")
    assert fit.factor == pytest.approx(0.7, rel=1e-4)
    assert cal.provenance.gpu == "h100-sxm" and fit.runs == (3,)
    assert gpu_curves(gpu, cal).sustained == pytest.approx(0.7, rel=1e-4)
    assert _step_compute(_train_run(1.0).rows[0], gpu, cal) == pytest.approx(seconds, rel=1e-4)
