"""Fit the compute model's curves to measured points: GEMMs and attention kernels.

Used by ``willitscale calibrate`` on ``bench matmul`` sweeps, and to derive the built-in
per-GPU constants of ``compute/curves.toml`` from published kernel benchmarks (each entry there
keeps the points it was fitted to in ``data``; ``tests/unit/test_compute_curves.py`` refits
them). Both fits minimise **relative** residuals (a slow small shape weighs as much as a fast
large one) with scipy's bounded least squares.

* GEMM (:func:`fit_gemm_curve`): points ``(M, N, K, FLOP/s)`` (kept in ``data`` as TFLOP/s); the model of
  :mod:`willitscale.compute.gemm` with ``efficiency``, ``k_half`` and ``kernel_overhead`` free
  (any of them can be held fixed: one point fixes only the efficiency).
* Attention (:func:`fit_attention_curve`): points ``(sequence length, FLOP/s)`` in the kernel's
  own FLOP convention (FlashAttention's: causal counts the unmasked half, the backward 2.5x the
  forward); ``rate(s) = peak x efficiency x s / (s + seq_half)``.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
from scipy.optimize import least_squares

from willitscale.compute.gemm import gemm_flops, gemm_time
from willitscale.errors import ConfigError
from willitscale.hardware.profile import AttentionCurve, GemmCurve

__all__ = ["fit_gemm_curve", "fit_attention_curve"]


def _rms(residuals) -> float:
    return float(np.sqrt(np.mean(np.square(residuals))))


def fit_gemm_curve(points, start: GemmCurve, *, bandwidth: float, fit_k_half: bool = True,
                   fit_overhead: bool = True, in_bytes: float = 2.0) -> GemmCurve:
    """``start`` with its efficiency (and ``k_half``, ``kernel_overhead`` unless held) fitted
    to ``points`` = rows of ``(M, N, K, FLOP/s)``."""
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 4 or len(pts) == 0:
        raise ConfigError("GEMM points", points, "rows of (M, N, K, FLOP/s)")
    m, n, k, rate = pts.T
    measured = gemm_flops(m, n, k) / rate
    free = 1 + fit_k_half + fit_overhead
    if free > len(pts):
        raise ConfigError(f"{len(pts)} GEMM point(s) cannot fix {free} constants: hold some")

    def curve(x) -> GemmCurve:
        i = iter(x)
        eff = next(i)
        kh = next(i) if fit_k_half else start.k_half
        ov = next(i) * 1e-6 if fit_overhead else start.kernel_overhead
        return replace(start, efficiency=float(eff), k_half=float(kh), kernel_overhead=float(ov))

    def residuals(x):
        return gemm_time(m, n, k, curve(x), bandwidth, in_bytes=in_bytes) / measured - 1.0

    x0 = [min(start.efficiency, 0.99)] + [start.k_half] * fit_k_half + [start.kernel_overhead * 1e6] * fit_overhead
    lower = [1e-3] + [0.0] * (fit_k_half + fit_overhead)
    upper = [1.0] + [1e5] * fit_k_half + [1e3] * fit_overhead
    sol = least_squares(residuals, x0, bounds=(lower, upper))
    best = curve(sol.x)
    return replace(best, points=len(pts), rms_error=_rms(residuals(sol.x)),
                   data=tuple((float(a), float(b), float(c), float(r) / 1e12) for a, b, c, r in pts))


def fit_attention_curve(points, *, peak: float, kernel: str, direction: str, causal: bool,
                        dtype: str = "bf16", head_dim: int = 128, source: str = "") -> AttentionCurve:
    """An :class:`AttentionCurve` fitted to ``points`` = rows of ``(sequence length, FLOP/s)``."""
    pts = np.asarray(points, dtype=float)
    if pts.ndim != 2 or pts.shape[1] != 2 or len(pts) == 0:
        raise ConfigError("attention points", points, "rows of (sequence length, FLOP/s)")
    s, rate = pts.T

    def model(x):
        return peak * x[0] * s / (s + x[1])

    def residuals(x):
        return rate / model(x) - 1.0

    if len(pts) == 1:  # one point: the efficiency at that length, no roll-off
        eff = float(rate[0] / peak)
        x = np.array([eff, 0.0])
    else:
        x = least_squares(residuals, [float(rate.max() / peak), 500.0],
                          bounds=([1e-3, 0.0], [1.0, 1e6])).x
    return AttentionCurve(kernel=kernel, direction=direction, causal=causal, dtype=dtype,
                          head_dim=head_dim, efficiency=float(x[0]), seq_half=float(x[1]),
                          points=len(pts), rms_error=_rms(residuals(x)), source=source,
                          data=tuple((float(a), float(b) / 1e12) for a, b in pts))
