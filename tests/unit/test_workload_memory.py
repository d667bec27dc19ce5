"""Training-state memory per convention and ZeRO stage."""

import numpy as np
import pytest

from willitscale.errors import ConfigError, UnknownNameError
from willitscale.memory.state import (
    CONVENTIONS,
    get_convention,
    state_bytes_per_gpu,
    state_memory,
)


def test_named_conventions_bytes_per_param():
    # ZeRO: 2 (fp16 weights) + 2 (fp16 grads) + 4 (fp32 master) + 4 + 4 (Adam m, v) = 16
    assert get_convention("zero-16").bytes_per_param == 16
    # handbook: 6 (fp32 + half weights) + 4 (fp32 grads) + 8 (Adam) = 18
    assert get_convention("handbook-18").bytes_per_param == 18
    # pure fp32 Adam: 4 + 4 + 8 = 16
    assert get_convention("fp32-16").bytes_per_param == 16
    for name, c in CONVENTIONS.items():
        assert c.name == name and c.source


def test_seeds_examples():
    # seeds/000: "18 bytes per parameter ... So 18*2 36GB" for a 2B model.
    assert state_bytes_per_gpu(2e9, "handbook-18") == 36e9
    # seeds/002: "16 * 175B" = 2.8 TB for GPT-3 in mixed precision; "~35 GPUs" of 80 GB.
    assert state_bytes_per_gpu(175e9, "zero-16") == 2.8e12
    assert state_bytes_per_gpu(175e9, "zero-16") / 80e9 == 35


@pytest.mark.parametrize(("stage", "expected_GB"), [(0, 120.0), (1, 31.4), (2, 16.6), (3, 1.88)])
def test_zero_paper_figure_1(stage, expected_GB):
    # Rajbhandari et al. 2020, Figure 1: Ψ = 7.5B, K = 12, N_d = 64:
    # baseline (2+2+K)Ψ = 120GB; P_os 2Ψ+2Ψ+KΨ/N_d = 31.4GB; P_os+g 2Ψ+(2+K)Ψ/N_d = 16.6GB;
    # P_os+g+p (2+2+K)Ψ/N_d = 1.88GB (rounded to 3 figures in the figure).
    got = state_bytes_per_gpu(7.5e9, "zero-16", stage, 64) / 1e9
    assert got == pytest.approx(expected_GB, rel=5e-3)


def test_breakdown_parts_shard_separately():
    # handbook-18 at ZeRO-2 over 4 ranks, 1e9 params: weights 2 GB whole; grads 4/4 = 1 GB;
    # master 4/4 = 1 GB; Adam 8/4 = 2 GB -> 6 GB.
    m = state_memory(1e9, "handbook-18", 2, 4)
    assert (m.weights, m.gradients, m.master, m.optimizer, m.total) == (2e9, 1e9, 1e9, 2e9, 6e9)
    assert m.bytes_per_param == 6


def test_fp32_has_no_master_so_zero1_shards_less():
    # fp32-16 at ZeRO-1 over 8: 4 + 4 + 8/8 = 9 bytes/param; zero-16: 2 + 2 + 12/8 = 5.5.
    assert state_bytes_per_gpu(1, "fp32-16", 1, 8) == 9
    assert state_bytes_per_gpu(1, "zero-16", 1, 8) == 5.5


def test_vectorized_over_params_stage_and_dp():
    stages = np.array([0, 1, 2, 3])
    dps = np.array([1, 8, 8, 8])
    got = state_bytes_per_gpu(1e9, "zero-16", stages, dps)
    # 16; 4 + 12/8 = 5.5; 2 + 14/8 = 3.75; 16/8 = 2 (GB per 1e9 params)
    np.testing.assert_allclose(got, [16e9, 5.5e9, 3.75e9, 2e9])
    grid = state_bytes_per_gpu(np.array([[1e9], [2e9]]), "zero-16", 3, np.array([1, 2, 4]))
    assert grid.shape == (2, 3)


def test_bad_input():
    with pytest.raises(UnknownNameError, match="zero-16"):
        get_convention("zero16")
    with pytest.raises(ConfigError, match="zero_stage"):
        state_bytes_per_gpu(1e9, "zero-16", 4, 8)
    with pytest.raises(ConfigError, match="dp"):
        state_bytes_per_gpu(1e9, "zero-16", 1, 0)


def test_more_sharding_never_needs_more_memory():
    for name in CONVENTIONS:
        per_stage = state_bytes_per_gpu(1e9, name, np.array([0, 1, 2, 3]), 16)
        assert np.all(np.diff(per_stage) <= 0)
