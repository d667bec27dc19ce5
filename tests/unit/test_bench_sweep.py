"""Sweep sizes and per-op counts follow nccl-tests (src/common.cu setupArgs, *GetCollByteCount)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from willitscale.bench.sweep import collective_shape, sweep_sizes
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError


def test_geometric_sweep_includes_both_ends():
    # -b 1MB -e 16MB -f 2: 1, 2, 4, 8, 16 MB (MB = 1e6 bytes)
    assert sweep_sizes(1_000_000, 16_000_000, factor=2) == [1e6, 2e6, 4e6, 8e6, 16e6]


def test_factor_that_overshoots_stops_below_max():
    # 1000 * 32 = 32000 <= 50000; 32000 * 32 > 50000
    assert sweep_sizes(1000, 50_000, factor=32) == [1000, 32_000]


def test_arithmetic_sweep_with_step():
    assert sweep_sizes(100, 400, factor=None, step_bytes=100) == [100, 200, 300, 400]


def test_single_size():
    assert sweep_sizes(4096, 4096, factor=2) == [4096]


@pytest.mark.parametrize("kwargs", [dict(min_bytes=0, max_bytes=8), dict(min_bytes=9, max_bytes=8),
                                    dict(min_bytes=1, max_bytes=8, factor=1.0)])
def test_bad_sweeps_are_config_errors(kwargs):
    with pytest.raises(ConfigError):
        sweep_sizes(**kwargs)


def test_all_reduce_keeps_every_element():
    # 1 MB of float32 = 250,000 elements, on any rank count
    s = collective_shape(Op.ALL_REDUCE, 1_000_000, 4, 3)
    assert (s.send_count, s.recv_count, s.param_count, s.size_bytes) == (250_000, 250_000, 250_000, 1_000_000)


def test_all_gather_rounds_to_a_multiple_of_ranks():
    # 1000 B / 4 B = 250 elements; over 3 ranks 83 each (249 gathered) -> real size 996 B
    s = collective_shape(Op.ALL_GATHER, 1000, 4, 3)
    assert (s.send_count, s.recv_count, s.param_count, s.size_bytes) == (83, 249, 83, 996)


def test_reduce_scatter_sends_all_receives_one_chunk():
    s = collective_shape(Op.REDUCE_SCATTER, 1000, 4, 3)
    assert (s.send_count, s.recv_count, s.param_count, s.size_bytes) == (249, 83, 83, 996)


def test_all_to_all_chunks_are_16_byte_aligned():
    # 1000 B float32 over 3 ranks: 83 per peer, rounded down to a multiple of 16/4 = 4 -> 80;
    # 240 elements = 960 B each way
    s = collective_shape(Op.ALL_TO_ALL, 1000, 4, 3)
    assert (s.param_count, s.send_count, s.size_bytes) == (80, 240, 960)


def test_tiny_sizes_round_up_to_one_element_per_rank():
    s = collective_shape(Op.ALL_GATHER, 4, 4, 8)
    assert s.param_count == 1 and s.size_bytes == 32


def test_send_recv_needs_two_ranks():
    with pytest.raises(ConfigError):
        collective_shape(Op.SEND_RECV, 1000, 4, 1)


@given(op=st.sampled_from(list(Op)), size=st.integers(1, 10**9), elt=st.sampled_from([1, 2, 4, 8]),
       ranks=st.integers(2, 512))
def test_rounding_never_grows_past_one_aligned_chunk(op, size, elt, ranks):
    s = collective_shape(op, size, elt, ranks)
    # the real size never exceeds the asked size, unless the minimum of one (aligned) chunk
    # per rank forces it up
    floor = ranks * max(1, 16 // elt) * elt if op is Op.ALL_TO_ALL else ranks * elt
    assert s.size_bytes <= max(size, floor)
    assert s.size_bytes % elt == 0
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER, Op.ALL_TO_ALL):
        assert s.size_bytes % (ranks * elt) == 0
