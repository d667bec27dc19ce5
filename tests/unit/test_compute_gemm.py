"""The GEMM model (willitscale.compute.gemm): exact cases derived by hand, and its limits."""

import numpy as np
import pytest

from willitscale.compute.gemm import gemm_time, wave_efficiency
from willitscale.hardware.profile import GemmCurve

CURVE = GemmCurve(dtype="bf16", peak_flop_rate=1000e12, efficiency=0.8, k_half=1000.0, tile_m=128,
                  tile_n=256, sms=132, kernel_overhead=2e-6)


def test_one_full_wave_at_k_half():
    # M = 12 x 128, N = 11 x 256: 132 tiles of 128 x 256 on 132 SMs, one full wave (q_wave 1);
    # K = k_half: q_k = 1/2. Time = 2 M N K / (1000e12 x 0.8 x 1 x 0.5) + 2 us.
    m, n, k = 12 * 128, 11 * 256, 1000
    expect = 2.0 * m * n * k / (1000e12 * 0.8 * 0.5) + 2e-6
    assert float(gemm_time(m, n, k, CURVE, 3e12)) == pytest.approx(expect)


def test_wave_quantisation_takes_the_best_tile():
    # 1700 x 2382: 128 x 256 tiles: 14 x 10 = 140 -> 2 waves, 140/264; 256 x 128: 7 x 19 = 133
    # -> 133/264; 128 x 128: 14 x 19 = 266 -> 266/396; 64 x 256: 27 x 10 = 270 -> 270/396;
    # 256 x 64: 7 x 38 = 266 -> 266/396. Best: 270/396 = 0.682.
    m, n = 1700, 2382
    got = float(wave_efficiency(m, n, tile_m=128, tile_n=256, sms=132))
    shapes = [(128, 256), (256, 128), (128, 128), (64, 256), (256, 64)]
    best = max(c / (np.ceil(c / 132) * 132) for c in
               (np.ceil(m / a) * np.ceil(n / b) for a, b in shapes))
    assert got == pytest.approx(best) == pytest.approx(270 / 396)


def test_small_k_without_fill_is_memory_bound():
    # K = 8 with no pipeline fill (k_half 0): 2 M N K / (0.8 x 1000e12) = 1.34 us of compute,
    # but the 8192 x 8192 output (2 bytes each) and the inputs take bytes / bandwidth = 44.8 us
    from dataclasses import replace

    m = n = 8192
    k = 8
    bytes_moved = 2.0 * (m * k + k * n) + 2.0 * m * n
    curve = replace(CURVE, k_half=0.0)
    assert float(gemm_time(m, n, k, curve, 3e12)) == pytest.approx(bytes_moved / 3e12 + 2e-6)


def test_zero_size_takes_no_time_and_bigger_takes_longer():
    assert float(gemm_time(0, 4096, 4096, CURVE, 3e12)) == 0.0
    sizes = [512, 1024, 2048, 4096, 8192]
    times = [float(gemm_time(s, s, s, CURVE, 3e12)) for s in sizes]
    assert all(a < b for a, b in zip(times, times[1:]))
    # and the rate rises with size towards the envelope, never above it
    rates = [2.0 * s ** 3 / t for s, t in zip(sizes, times)]
    assert all(a < b for a, b in zip(rates, rates[1:]))
    assert rates[-1] < 1000e12 * 0.8
