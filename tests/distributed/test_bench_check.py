"""The correctness check counts wrong elements instead of assuming success."""

from __future__ import annotations

import pytest

from willitscale.bench.options import CollectiveOptions
from willitscale.collectives.ops import Op

pytestmark = pytest.mark.distributed


@pytest.fixture
def ctx(monkeypatch):
    import torch
    import torch.distributed as dist

    from willitscale.bench.dist import Context

    store = dist.HashStore()
    dist.init_process_group("gloo", store=store, rank=0, world_size=1)
    yield Context(torch=torch, rank=0, world_size=1, local_rank=0, local_world_size=1,
                  backend="gloo", device=torch.device("cpu"))
    dist.destroy_process_group()


def test_an_op_that_does_nothing_is_counted_wrong(ctx, monkeypatch):
    from willitscale.bench import collectives, verify

    real = verify.make_buffers

    def broken(*args, **kwargs):
        bufs = real(*args, **kwargs)
        bufs.call = lambda: None  # the "collective" never writes its output
        return bufs

    monkeypatch.setattr(collectives, "make_buffers", broken)
    opts = CollectiveOptions(ops=("all_gather",), min_bytes=4000, max_bytes=4000, iters=1, warmup=0)
    shape = collectives.sweep_shapes(Op.ALL_GATHER, opts, 1)[0]
    row = collectives.measure(ctx, opts, shape, in_place=False)
    # 4000 B of float32 = 1000 elements gathered from 1 rank; the output stays zero while the
    # expected values are 1..m: all 1000 are wrong
    assert row.wrong == 1000


def test_a_real_op_is_right(ctx):
    from willitscale.bench import collectives

    opts = CollectiveOptions(ops=("all_reduce",), min_bytes=4000, max_bytes=4000, iters=1, warmup=0,
                             dtype="bfloat16")
    row = collectives.measure(ctx, opts, collectives.sweep_shapes(Op.ALL_REDUCE, opts, 1)[0], False)
    assert row.wrong == 0 and row.count == 2000
