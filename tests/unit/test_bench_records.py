"""Benchmark rows: unit-named JSON, exact round trips, nccl-tests' algbw/busbw."""

from __future__ import annotations

import pytest

from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError
from willitscale.results.records import (
    CollectiveRow,
    MatmulRow,
    TrainRow,
    row_from_json,
)


def _row(**kw):
    base = dict(op=Op.ALL_REDUCE, size_bytes=4_000_000, count=1_000_000, dtype="float32",
                redop="sum", root=-1, in_place=False, ranks=2, time=0.16, wrong=0)
    return CollectiveRow(**{**base, **kw})


def test_all_reduce_bandwidths():
    # 4 MB in 0.16 s: algbw 25 MB/s; 2 ranks: busbw = 25 MB/s x 2(2-1)/2 = 25 MB/s
    data = _row().to_json()
    assert data["algbw_GBps"] == pytest.approx(0.025)
    assert data["busbw_GBps"] == pytest.approx(0.025)
    assert data["time_us"] == pytest.approx(160_000)
    # 8 ranks: busbw = algbw x 2 x 7/8 = 43.75 MB/s
    assert _row(ranks=8).to_json()["busbw_GBps"] == pytest.approx(0.04375)


def test_round_trips():
    row = _row(op=Op.ALL_GATHER, redop="none", in_place=True, wrong=3)
    assert row_from_json("collectives", row.to_json()) == row
    mm = MatmulRow(m=64, n=32, k=16, dtype="bfloat16", device="cpu", time=2e-6)
    assert row_from_json("matmul", mm.to_json()) == mm
    # 2 x 64 x 32 x 16 = 65,536 FLOP in 2 us = 32.768 GFLOP/s
    assert mm.to_json()["achieved_TFLOPS"] == pytest.approx(0.032768)
    tr = TrainRow(model="gpt2-tiny", layers=2, hidden=128, heads=4, vocab=256, seq_len=64,
                  params=495_104, batch_per_rank=2, ranks=2, nodes=1, dtype="float32",
                  bucket_bytes=2**20, device="cpu", step=0.5, forward=0.1, backward=0.3,
                  backward_no_sync=0.25, optimizer=0.1, steps=3)
    assert row_from_json("train", tr.to_json()) == tr
    # peak memory: None on CPU (and in rows stored before it was recorded), bytes on CUDA
    assert tr.to_json()["peak_allocated_bytes"] is None
    old = {k: v for k, v in tr.to_json().items() if not k.startswith("peak_")}
    assert row_from_json("train", old) == tr
    from dataclasses import replace

    cuda = replace(tr, device="NVIDIA H100", peak_allocated_bytes=3_000_000_000,
                   peak_reserved_bytes=3_200_000_000)
    assert row_from_json("train", cuda.to_json()) == cuda
    # exposed comm = 0.3 - 0.25; tokens/s = 2 x 2 x 64 / 0.5
    assert tr.to_json()["exposed_comm_s"] == pytest.approx(0.05)
    assert tr.to_json()["tokens_per_s"] == pytest.approx(512)


def test_malformed_rows_are_config_errors():
    with pytest.raises(ConfigError):
        row_from_json("collectives", {"op": "all_reduce"})
    with pytest.raises(ConfigError):
        row_from_json("nope", {})
