"""Fit a measured profile's curves (``[[gemm]]``, ``[[attention]]``, ``[[memory]]``) to the
rows of ``bench matmul``, ``bench attention`` and ``bench bandwidth``; and the time each curve
gives (the same formulas the fits invert).

The curves' forms are those of :mod:`willitscale.hardware.profile` (the compute issue owns them):

* memory: ``t = bytes / B + c`` -- ``B`` the achievable bandwidth, ``c`` one kernel's fixed cost;
* attention: ``rate(s) = P e s / (s + s_half)`` on the FLOPs the kernel executes, ``P`` the
  dtype's dense peak. Inverted, ``1 / rate = a + b / s`` with ``a = 1 / (P e)`` and
  ``b = s_half / (P e)``: linear in ``(a, b)``, fitted by least squares on the relative error
  ``rate x (a + b / s) - 1`` (each point weighs the same whatever its size);
* GEMM: the compute model's own time (:func:`willitscale.compute.gemm.gemm_time`: wave
  quantisation over the best of the curve's tile shapes, a ``k / (k + k_half)`` pipeline fill,
  the HBM roofline and one kernel's fixed cost), so the constants ``calibrate --profile`` writes
  are the ones estimates apply. ``e``, ``k_half`` and ``c`` are fitted (scipy's least squares on
  the log of the time ratio); the tile, SM count and bandwidth are given.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numpy as np

from willitscale.compute.gemm import gemm_time as compute_gemm_time
from willitscale.errors import ConfigError
from willitscale.hardware.profile import AttentionCurve, GemmCurve, MemoryCurve
from willitscale.results.kernel_records import AttentionRow, BandwidthRow
from willitscale.results.records import MatmulRow

__all__ = ["KERNEL_OF_BACKEND", "PROFILE_DTYPE", "gemm_time", "attention_time", "memory_time",
           "fit_memory", "fit_attention", "fit_gemm"]

#: SDPA backend -> the kernel name of a profile's [[attention]] entry. PyTorch's FLASH_ATTENTION
#: backend is FlashAttention-2 (PyTorch 2.2 release notes: "scaled_dot_product_attention (SDPA)
#: now supports FlashAttention-2"); EFFICIENT_ATTENTION is xFormers' memory-efficient kernel
#: (Rabe & Staats 2021); MATH is the unfused softmax(Q K^T) V.
KERNEL_OF_BACKEND = {"FLASH_ATTENTION": "fa2", "CUDNN_ATTENTION": "cudnn",
                     "EFFICIENT_ATTENTION": "mem-efficient", "MATH": "unfused"}
#: bench dtype -> the profile's dtype name (the catalog's peak_flops keys)
PROFILE_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32",
                 "float8_e4m3fn-tensorwise": "fp8", "float8_e4m3fn-rowwise": "fp8-rowwise"}
ELEMENT_BYTES = {"bfloat16": 2, "float16": 2, "float32": 4, "float8_e4m3fn-tensorwise": 1,
                 "float8_e4m3fn-rowwise": 1}


def memory_time(curve: MemoryCurve, size_bytes: float) -> float:
    return size_bytes / curve.bandwidth + curve.kernel_overhead


def attention_time(curve: AttentionCurve, peak: float, flops: float, seq_len: float) -> float:
    rate = peak * curve.efficiency * seq_len / (seq_len + curve.seq_half)
    return flops / rate


def gemm_time(curve: GemmCurve, m, n, k, *, element_bytes: float, bandwidth: float):
    """Seconds of one ``(m x k) @ (k x n)`` product: the compute model's GEMM time with the bench's
    element widths (an fp8 product writes a bf16 output)."""
    return compute_gemm_time(m, n, k, curve, bandwidth, in_bytes=element_bytes,
                             out_bytes=max(element_bytes, 2))


def _rms_relative(predicted, measured) -> float:
    ratio = np.asarray(predicted, float) / np.asarray(measured, float) - 1
    return float(np.sqrt(np.mean(ratio**2)))


def fit_memory(rows: Sequence[BandwidthRow], *, runs: Iterable[int] = ()) -> MemoryCurve:
    """``t = bytes / B + c`` by least squares on relative residuals ``(x S + c) / t - 1``."""
    if len(rows) < 2:
        raise ConfigError("bandwidth rows", len(rows), "at least 2 sizes to fit bandwidth and overhead")
    size = np.array([r.size_bytes for r in rows], float)
    t = np.array([r.time for r in rows], float)
    design = np.column_stack([size / t, 1 / t])
    (x, c), *_ = np.linalg.lstsq(design, np.ones_like(t), rcond=None)
    if c < 0 or x <= 0:  # no fixed cost visible (or noise hides the slope): bandwidth alone
        x, c = float(np.sum(size / t) / np.sum((size / t) ** 2)), 0.0
    curve = MemoryCurve(bandwidth=float(1 / x), kernel_overhead=float(c), points=len(rows),
                        rms_error=0.0, runs=tuple(runs), source="willitscale bench bandwidth")
    rms = _rms_relative([memory_time(curve, s) for s in size], t)
    return MemoryCurve(bandwidth=curve.bandwidth, kernel_overhead=curve.kernel_overhead,
                       points=len(rows), rms_error=rms, runs=tuple(runs), source=curve.source)


def _attention_group(rows: Sequence[AttentionRow], peak: float, runs) -> AttentionCurve:
    first = rows[0]
    s = np.array([r.seq_len for r in rows], float)
    rate = np.array([r.flop_rate for r in rows], float)
    (a, b), *_ = np.linalg.lstsq(np.column_stack([rate, rate / s]), np.ones_like(s), rcond=None)
    if b < 0 or a <= 0:  # no rise with length visible: a flat rate
        a, b = float(np.sum(rate) / np.sum(rate**2)), 0.0
    eff = 1 / (peak * a)
    if not 0 < eff <= 1:
        raise ConfigError(f"attention {first.backend} {first.direction}: efficiency", eff,
                          f"a fraction of the peak {peak / 1e12:.4g} TFLOP/s in (0, 1]: is the peak "
                          "the GPU's dense peak for this dtype?")
    curve = AttentionCurve(kernel=KERNEL_OF_BACKEND.get(first.backend, first.backend.lower()),
                           direction=first.direction, causal=first.causal,
                           dtype=PROFILE_DTYPE.get(first.dtype, first.dtype), head_dim=first.head_dim,
                           efficiency=eff, seq_half=b / a)
    predicted = [attention_time(curve, peak, r.flops, r.seq_len) for r in rows]
    return AttentionCurve(kernel=curve.kernel, direction=curve.direction, causal=curve.causal,
                          dtype=curve.dtype, head_dim=curve.head_dim, efficiency=eff,
                          seq_half=curve.seq_half, points=len(rows),
                          rms_error=_rms_relative(predicted, [r.time for r in rows]),
                          runs=tuple(runs), source=f"willitscale bench attention ({first.backend})")


def fit_attention(rows: Sequence[AttentionRow], *, peak: float,
                  runs: Iterable[int] = ()) -> list[AttentionCurve]:
    """One curve per backend, pass, causality, dtype and head dim with >= 2 measured lengths;
    ``peak`` is the dtype's dense peak FLOP/s (unsupported and skipped rows are left out)."""
    groups: dict[tuple, list[AttentionRow]] = {}
    for r in rows:
        if r.status == "ok":
            groups.setdefault((r.backend, r.direction, r.causal, r.dtype, r.head_dim), []).append(r)
    return [_attention_group(g, peak, tuple(runs)) for g in groups.values()
            if len({r.seq_len for r in g}) >= 2]


def fit_gemm(rows: Sequence[MatmulRow], *, peak: float, bandwidth: float, sms: int = 132,
             tile: tuple[int, int] = (128, 256), runs: Iterable[int] = ()) -> GemmCurve:
    """Efficiency, ``k_half`` and the fixed cost of one call, for the rows of one dtype."""
    # Apart from calibrate.curves.fit_gemm_curve (plain ``calibrate``) as it needs no built-in
    # curve to start from (any catalog GPU with a peak); both fit the compute model's GEMM time.
    from scipy.optimize import least_squares

    dtypes = {r.dtype for r in rows}
    if len(dtypes) != 1 or len(rows) < 3:
        raise ConfigError("matmul rows", sorted(dtypes), "at least 3 rows of one dtype")
    dtype = dtypes.pop()
    m, n, k, t = (np.array([getattr(r, f) for r in rows], float) for f in ("m", "n", "k", "time"))

    def curve_of(x) -> GemmCurve:
        return GemmCurve(dtype=PROFILE_DTYPE.get(dtype, dtype), peak_flop_rate=peak,
                         efficiency=min(1.0, max(1e-6, x[0])), k_half=max(0.0, x[1]),
                         tile_m=tile[0], tile_n=tile[1], sms=sms, kernel_overhead=max(0.0, x[2]))

    def residuals(x):
        predicted = gemm_time(curve_of(x), m, n, k, element_bytes=ELEMENT_BYTES.get(dtype, 2),
                              bandwidth=bandwidth)
        return np.log(predicted / t)

    best_rate = float(np.max(2 * m * n * k / t))
    start = [min(1.0, max(1e-6, best_rate / peak)), 128.0, float(np.min(t)) / 2]
    fit = least_squares(residuals, x0=start, bounds=([1e-6, 0.0, 0.0], [1.0, 1e5, 1.0]),
                        x_scale=[start[0], 100.0, max(start[2], 1e-7)])
    best = curve_of(fit.x)
    rms = _rms_relative(gemm_time(best, m, n, k, element_bytes=ELEMENT_BYTES.get(dtype, 2),
                                  bandwidth=bandwidth), t)
    return GemmCurve(dtype=best.dtype, peak_flop_rate=peak, efficiency=best.efficiency,
                     k_half=best.k_half, tile_m=tile[0], tile_n=tile[1], sms=sms,
                     kernel_overhead=best.kernel_overhead, points=len(rows),
                     rms_error=rms if math.isfinite(rms) else 0.0, runs=tuple(runs),
                     source="willitscale bench matmul")
