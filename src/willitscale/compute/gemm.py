"""How long one GEMM takes on a GPU, from its shape: :func:`gemm_time`.

A GEMM ``C (M x N) = A (M x K) @ B (K x N)`` is cut into output tiles ``Tm x Tn``; each SM
computes one tile at a time, looping over ``K``. The model (:class:`~willitscale.hardware.profile.GemmCurve`
holds its constants for one dtype on one GPU)::

    tiles   = ceil(M / Tm) x ceil(N / Tn) x batch        (the best of the tile's shapes, below)
    waves   = ceil(tiles / SMs)
    q_wave  = tiles / (waves x SMs)                      wave quantisation: the last wave's idle SMs
    q_k     = K / (K + k_half)                           the pipeline fill of each tile's K loop
    compute = 2 M N K batch / (peak x efficiency x q_wave x q_k)
    memory  = (a (M K + K N) + c M N) batch / HBM bandwidth   a, c bytes per input, output element
    time    = max(compute, memory) + kernel_overhead     the roofline for small M, N or K

``efficiency`` is the best large-shape fraction of the datasheet peak (the Maximum Achievable
Matmul FLOPS envelope), ``k_half`` and ``kernel_overhead`` are fitted to per-shape measurements
(compute/curves.toml gives each GPU's with its source; a measured profile replaces them).
Named approximations: cuBLAS picks a tile per shape by heuristics that are not documented
(NVIDIA's *Matrix Multiplication Background User's Guide* explains the effect, not the choice);
the model takes the best wave fill among the curve's tile ``Tm x Tn``, its transpose and the
tiles with one side halved, all at the same per-tile rate. Split-K and stream-K kernels, which
soften wave quantisation for small ``M N``, are not modelled.
"""

from __future__ import annotations

import numpy as np

__all__ = ["gemm_time", "gemm_flops", "wave_efficiency"]


def gemm_flops(m, n, k, batch=1):
    """``2 M N K`` per product, times ``batch``."""
    return 2.0 * np.asarray(m, dtype=float) * n * k * batch


def _waves(tiles, sms: int):
    waves = np.maximum(np.ceil(tiles / sms), 1.0)
    return tiles / (waves * sms)


def _tiles(tile_m: int, tile_n: int) -> tuple[tuple[int, int], ...]:
    """The tile, its transpose and the tiles with one side halved (both orientations)."""
    shapes = {(tile_m, tile_n), (tile_m, max(tile_n // 2, 1)), (max(tile_m // 2, 1), tile_n)}
    return tuple(sorted(shapes | {(b, a) for a, b in shapes}))


def wave_efficiency(m, n, *, tile_m: int, tile_n: int, sms: int, batch=1):
    """``q_wave``: the share of the SMs busy over all waves, with the best tile shape."""
    m, n = np.asarray(m, dtype=float), np.asarray(n, dtype=float)
    best = np.zeros(np.broadcast(m, n).shape)
    for tm, tn in _tiles(tile_m, tile_n):
        best = np.maximum(best, _waves(np.ceil(m / tm) * np.ceil(n / tn) * batch, sms))
    return best


def gemm_time(m, n, k, curve, bandwidth: float, *, batch=1, in_bytes: float = 2.0,
              out_bytes: float = 2.0):
    """Seconds of ``batch`` GEMMs of ``(M x K) @ (K x N)`` (numpy-friendly in M, N, K, batch).

    ``curve`` is a :class:`~willitscale.hardware.profile.GemmCurve`; ``bandwidth`` the
    achievable HBM bandwidth (bytes/s). A product with a zero dimension takes no time."""
    m, n, k = (np.asarray(x, dtype=float) for x in (m, n, k))
    q_wave = wave_efficiency(m, n, tile_m=curve.tile_m, tile_n=curve.tile_n, sms=curve.sms,
                             batch=batch)
    q_k = k / (k + curve.k_half)
    flops = gemm_flops(m, n, k, batch)
    rate = curve.peak_flop_rate * curve.efficiency * q_wave * q_k
    with np.errstate(divide="ignore", invalid="ignore"):
        compute = np.where(flops > 0, flops / rate, 0.0)
    moved = (in_bytes * (m * k + k * n) + out_bytes * m * n) * batch
    return np.where(flops > 0, np.maximum(compute, moved / bandwidth) + curve.kernel_overhead, 0.0)
