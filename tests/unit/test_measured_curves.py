"""The measured-profile fits (calibrate.measured_curves) on SYNTHETIC rows: every row here is
generated from a curve with known constants (no measurement), and the fit must give those
constants back. Derivations beside each test."""

from __future__ import annotations

import pytest

from willitscale.calibrate.measured_curves import (
    attention_time,
    fit_attention,
    fit_gemm,
    fit_memory,
    gemm_time,
    memory_time,
)
from willitscale.hardware.profile import AttentionCurve, GemmCurve, MemoryCurve
from willitscale.results.kernel_records import (
    AttentionRow,
    BandwidthRow,
    attention_flops,
)
from willitscale.results.records import MatmulRow

PEAK = 989.4e12  # H100 SXM dense BF16 (the catalog's figure); any peak would do


def test_memory_fit_recovers_bandwidth_and_overhead():
    # t = S / 3.0e12 + 4 us exactly: the linear fit is exact (residuals 0)
    truth = MemoryCurve(bandwidth=3.0e12, kernel_overhead=4e-6)
    rows = [BandwidthRow(op="copy", elements=e, dtype="bfloat16", size_bytes=4 * e, device="synthetic",
                         time=memory_time(truth, 4 * e)) for e in (2**18, 2**20, 2**22, 2**24, 2**26)]
    fit = fit_memory(rows)
    assert fit.bandwidth == pytest.approx(3.0e12, rel=1e-9)
    assert fit.kernel_overhead == pytest.approx(4e-6, rel=1e-6)
    assert fit.rms_error < 1e-9 and fit.points == 5


def test_attention_fit_recovers_efficiency_and_seq_half():
    # rate(s) = P e s / (s + s_half); 1/rate = 1/(P e) + s_half/(P e s) is linear in 1/s, so the
    # fit is exact: e = 0.6, s_half = 1500 come back
    truth = AttentionCurve(kernel="fa2", direction="forward", causal=True, efficiency=0.6, seq_half=1500)
    rows = []
    for s in (512, 1024, 2048, 4096, 8192, 16384):
        b, h, d = max(1, 16384 // s), 16, 128
        flops = attention_flops(batch=b, heads=h, seq_len=s, head_dim=d, causal=True, direction="forward")
        rows.append(AttentionRow(backend="FLASH_ATTENTION", direction="forward", causal=True,
                                 dtype="bfloat16", batch=b, heads=h, seq_len=s, head_dim=d,
                                 device="synthetic", time=attention_time(truth, PEAK, flops, s)))
    rows.append(AttentionRow(backend="CUDNN_ATTENTION", direction="forward", causal=True,
                             dtype="bfloat16", batch=1, heads=16, seq_len=512, head_dim=128,
                             device="synthetic", status="unsupported", reason="synthetic"))
    (fit,) = fit_attention(rows, peak=PEAK)  # the unsupported row is no curve
    assert (fit.kernel, fit.direction, fit.causal, fit.dtype, fit.head_dim) == ("fa2", "forward", True, "bf16", 128)
    assert fit.efficiency == pytest.approx(0.6, rel=1e-9)
    assert fit.seq_half == pytest.approx(1500, rel=1e-9)


def test_gemm_fit_recovers_efficiency_k_half_and_overhead():
    truth = GemmCurve(dtype="bf16", peak_flop_rate=PEAK, efficiency=0.74, k_half=160.0,
                      kernel_overhead=6e-6)
    sizes = [256, 512, 1024, 2048, 4096, 8192, 16384]
    shapes = [(n, n, n) for n in sizes] + [(8192, 8192, k) for k in (128, 256, 512)] + \
             [(2048, 3 * 2048, 2048), (16384, 2048, 8192), (4096, 50304, 768)]
    rows = [MatmulRow(m=m, n=n, k=k, dtype="bfloat16", device="synthetic",
                      time=float(gemm_time(truth, m, n, k, element_bytes=2, bandwidth=3.0e12)))
            for m, n, k in shapes]
    fit = fit_gemm(rows, peak=PEAK, bandwidth=3.0e12)
    assert fit.efficiency == pytest.approx(0.74, rel=1e-3)
    assert fit.k_half == pytest.approx(160.0, rel=1e-2)
    assert fit.kernel_overhead == pytest.approx(6e-6, rel=1e-2)
    assert fit.rms_error < 1e-3


def test_wave_quantisation_of_the_gemm_time():
    # 132 SMs, 128 x 256 tiles: m = n = 4096 gives 32 x 16 = 512 tiles = 3.88 waves, run as 4:
    # the rate is 512 / 528 of the full-wave rate; k = 4096, k_half 0, no overhead, bandwidth
    # infinite -> t = 2 m n k / (P e 512/528)
    curve = GemmCurve(dtype="bf16", peak_flop_rate=PEAK, efficiency=0.8, k_half=0.0)
    t = float(gemm_time(curve, 4096, 4096, 4096, element_bytes=2, bandwidth=1e30))
    assert t == pytest.approx(2 * 4096**3 / (PEAK * 0.8 * 512 / 528), rel=1e-12)


def test_a_ragged_gemm_is_timed_as_estimates_time_it():
    # calibrate --profile must fit the constants of the GEMM time estimates apply
    # (compute.gemm.gemm_time: the best wave fill among the tile, its transpose and the tiles
    # with one side halved). m = n = 1024 on 132 SMs: the 128 x 256 tile gives 8 x 4 = 32 tiles
    # (32/132 of the SMs busy), 128 x 128 and 64 x 256 give 64 tiles (64/132): the best is 64/132.
    # k_half 0, no overhead, bandwidth infinite -> t = 2 * 1024^3 / (P e 64/132); the one-tile
    # time (32/132) would be twice that.
    curve = GemmCurve(dtype="bf16", peak_flop_rate=PEAK, efficiency=0.8, k_half=0.0)
    t = float(gemm_time(curve, 1024, 1024, 1024, element_bytes=2, bandwidth=1e30))
    assert t == pytest.approx(2 * 1024**3 / (PEAK * 0.8 * 64 / 132), rel=1e-12)
