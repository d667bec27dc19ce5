"""The built-in per-GPU curves (compute/curves.toml): every fitted entry refits from the points
it keeps, derived entries follow their stated derivation, every catalog GPU but the V100 has
curves, and the FP8 model reproduces Transformer Engine's measured GEMM speed-ups."""

from dataclasses import replace

import numpy as np
import pytest

from willitscale.calibrate.curves import fit_attention_curve, fit_gemm_curve
from willitscale.compute.curves import builtin_gpus, gpu_curves
from willitscale.compute.layer import LayerSpec, _linear
from willitscale.hardware.calibration import Calibration
from willitscale.hardware.catalog import get_gpu, list_gpus
from willitscale.hardware.profile import GemmCurve, Provenance


def _curves(name):
    return gpu_curves(get_gpu(name))


def test_every_catalog_gpu_but_the_v100_has_curves_at_its_own_peaks():
    names = {g.name for g in list_gpus()}
    assert set(builtin_gpus()) == names - {"v100-sxm2-32gb"}
    assert gpu_curves(get_gpu("v100-sxm2-32gb")) is None
    for name in builtin_gpus():
        c = _curves(name)
        for dtype, curve in c.gemm.items():
            assert curve.peak_flop_rate == pytest.approx(get_gpu(name).peak(dtype)), (name, dtype)
        assert c.memory.bandwidth <= get_gpu(name).memory_bandwidth
        assert c.attention_kernel in c.kernels()


def test_the_h100_gemm_curve_is_the_fit_of_its_points():
    h100 = _curves("h100-sxm").gemm_for("bf16")
    pts = [(m, n, k, t * 1e12) for m, n, k, t in h100.data]
    assert len(pts) == 4
    start = replace(h100, efficiency=0.8, k_half=500.0, data=(), points=0, rms_error=0.0)
    refit = fit_gemm_curve(pts, start, bandwidth=_curves("h100-sxm").memory.bandwidth,
                           fit_overhead=False)
    assert refit.efficiency == pytest.approx(h100.efficiency, rel=1e-3)
    assert refit.k_half == pytest.approx(h100.k_half, rel=1e-2)


def test_gpus_with_one_best_shape_scale_the_h100_curve():
    # efficiency = H100 curve's x (this GPU's best-shape efficiency / H100's best-shape one)
    h100 = _curves("h100-sxm").gemm_for("bf16")
    h100_best = 794.5e12 / get_gpu("h100-sxm").peak("bf16")  # the MAMF table's H100 row
    for name, dtype in (("a100-80gb-sxm", "bf16"), ("b200", "bf16"), ("b200", "fp8"),
                        ("mi300x", "bf16"), ("h100-sxm", "fp8"), ("h200-sxm", "fp8")):
        c = _curves(name).gemm_for(dtype)
        (_, _, _, best), = c.data
        assert c.efficiency == pytest.approx(h100.efficiency * (best * 1e12 / c.peak_flop_rate)
                                             / h100_best, rel=1e-6), (name, dtype)


def test_every_fitted_attention_curve_refits_from_its_points():
    checked = 0
    for name in ("a100-80gb-sxm", "h100-sxm"):
        for c in _curves(name).attention:
            if c.points < 2:
                continue
            pts = [(s, r * 1e12) for s, r in c.data]
            refit = fit_attention_curve(pts, peak=get_gpu(name).peak("bf16"), kernel=c.kernel,
                                        direction=c.direction, causal=c.causal, head_dim=c.head_dim)
            assert refit.efficiency == pytest.approx(c.efficiency, rel=1e-3), c.key
            assert refit.seq_half == pytest.approx(c.seq_half, rel=2e-2, abs=2.0), c.key
            checked += 1
    assert checked >= 30


#: FlashAttention-2's H100 forward+backward TFLOP/s, causal, head dim 128, at 512 ... 16K tokens:
#: the README figure Dao-AILab/flash-attention @ 0251105, assets/flash2_h100_fwd_bwd_benchmark.png
FA2_H100_FWDBWD_CAUSAL_D128 = (163, 221, 265, 294, 308, 328)


def test_fa2_on_hopper_times_forward_and_backward_so_that_a_call_costs_the_combined_time():
    # FA's convention: a call is F forward FLOPs and 2.5 F backward ones, so its combined rate R
    # satisfies 3.5 / R = 1 / R_fwd + 2.5 / R_bwd at every length both figures give
    c = _curves("h100-sxm")
    fwd = dict(c.attention_for("fa2", "forward", True, 128).data)
    bwd = dict(c.attention_for("fa2", "backward", True, 128).data)
    assert fwd[16384] == 335  # the FA3 paper's figure, FlashAttention-2 bar, causal d128 at 16K
    for s, combined in zip((512, 1024, 2048, 4096, 8192, 16384), FA2_H100_FWDBWD_CAUSAL_D128):
        assert 3.5 / combined == pytest.approx(1 / fwd[s] + 2.5 / bwd[s], rel=1e-9), s
        assert bwd[s] < combined < fwd[s], s  # the backward is the slower pass


def test_attention_lookup_takes_the_nearest_head_dimension():
    c = _curves("h100-sxm")
    assert c.attention_for("fa3", "forward", True, 96).head_dim == 128  # log2: 128/96 < 96/64
    assert c.attention_for("fa3", "forward", True, 80).head_dim == 64
    assert c.attention_for("fa3", "forward", True, 200).head_dim == 256


def _spec(gpu, dtype, recipe="delayed"):
    g = get_gpu(gpu)
    return LayerSpec(hidden=4096, q_dim=4096, kv_dim=4096, heads=32, kv_heads=32, head_dim=128,
                     ffn=16384, gated=False, rms=False, rope=False, dropout=False, experts=0,
                     top_k=0, vocab=1, seq_len=1, keys_causal=1.0, keys_full=1.0, dtype=dtype,
                     fusion="fused", fp8_recipe=recipe, fp8_transpose=True, flash=True,
                     kernel="fa3", curves=gpu_curves(g), peak=g.peak(dtype),
                     attention_peak=g.peak("bf16"))


def _layer_gemms(spec):
    """Forward + backward of the four linear layers of Transformer Engine's 5B benchmark layer
    (hidden 4096, FFN 16384, M = 15,872 tokens): (GEMM seconds, cast seconds)."""
    ops = []
    for name, k, n in (("QKV", 4096, 12288), ("proj", 4096, 4096), ("up", 4096, 16384),
                       ("down", 16384, 4096)):
        ops += _linear(spec, name, np.array([15872.0]), k, n)
    gemm = sum(float(np.sum(o.fwd + o.bwd)) for o in ops if o.kind == "gemm")
    casts = sum(float(np.sum(o.fwd + o.bwd)) for o in ops if o.kind == "memory")
    return gemm, casts


@pytest.mark.parametrize("recipe, measured", [("delayed", 1.69), ("tensorwise", 1.58)])
def test_fp8_layer_speedup_matches_transformer_engine(recipe, measured):
    # Transformer Engine's GEMM benchmark of that layer on H200 (docs/examples/gemm_profiling,
    # autocast, casts included): FP8 delayed scaling 1.69x bf16, current scaling 1.58x. Our H200
    # curves (FP8 from its own best shape, bf16 the H100's) with the casts of ops.fp8_cast_bytes:
    bf16, _ = _layer_gemms(_spec("h200-sxm", "bf16"))
    gemm, casts = _layer_gemms(_spec("h200-sxm", "fp8", recipe))
    assert bf16 / (gemm + casts) == pytest.approx(measured, rel=0.05)


def test_a_measured_profile_replaces_the_builtin_curve():
    h100 = get_gpu("h100-sxm")
    mine = GemmCurve(dtype="bf16", peak_flop_rate=989.4e12, efficiency=0.5, k_half=100.0)
    cal = Calibration(provenance=Provenance(gpu="h100-sxm"), sections={"gemm": (mine,)})
    merged = gpu_curves(h100, cal)
    assert merged.gemm_for("bf16") == mine and merged.measured == ("gemm bf16",)
    assert merged.gemm_for("fp8") == gpu_curves(h100).gemm_for("fp8")
    other = Calibration(provenance=Provenance(gpu="a100-80gb-sxm"), sections={"gemm": (mine,)})
    assert gpu_curves(h100, other).gemm_for("bf16") != mine  # measured on another GPU: ignored
