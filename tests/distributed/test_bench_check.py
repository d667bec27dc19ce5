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

    from willitscale.bench.ranks.dist import Context

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
    row = collectives.measure(ctx, opts, collectives.sweep_shapes(Op.ALL_REDUCE, opts, 1)[0], True)
    assert row.wrong == 0 and row.count == 2000


@pytest.mark.parametrize("op,redop", [("all_reduce", "sum"), ("all_reduce", "max"),
                                      ("reduce_scatter", "min"), ("all_gather", "none"),
                                      ("all_to_all", "none")])
def test_expected_output_of_rank_1_of_3(op, redop):
    # the expectation is built one rank's pattern at a time (never n full buffers at once);
    # here it is recomputed independently with numpy from the documented pattern
    # (7 i + 13 q) mod m + 1 for a 3-rank world seen from rank 1 (no process group needed)
    import numpy as np
    import torch

    from willitscale.bench import verify
    from willitscale.bench.ranks.dist import Context
    from willitscale.bench.sweep import collective_shape

    n, r, chunk = 3, 1, 8  # all_to_all chunks align to 16 B (4 float32), as nccl-tests
    ctx = Context(torch=torch, rank=r, world_size=n, local_rank=r, local_world_size=n,
                  backend="gloo", device=torch.device("cpu"))
    shape = collective_shape(Op(op), chunk * 4 * (1 if op == "all_reduce" else n), 4, n)
    assert shape.param_count == chunk
    in_place = op != "all_to_all" and op != "all_gather"
    reduce = "sum" if redop == "none" else redop  # gather/all-to-all: any redop, unused
    bufs = verify.make_buffers(ctx, shape, "float32", in_place=in_place, redop=reduce, root=0)
    expected = verify.fill_and_expect(ctx, bufs, shape, "float32", redop=reduce, root=0)
    m = verify.pattern_modulus("float32", n, reduce)
    pat = lambda q, start, count: (7 * np.arange(start, start + count) + 13 * q) % m + 1  # noqa: E731
    want = {"all_reduce": lambda: getattr(np, redop)([pat(q, 0, chunk) for q in range(n)], axis=0),
            "reduce_scatter": lambda: np.min([pat(q, r * chunk, chunk) for q in range(n)], axis=0),
            "all_gather": lambda: np.concatenate([pat(q, 0, chunk) for q in range(n)]),
            "all_to_all": lambda: np.concatenate([pat(q, r * chunk, chunk) for q in range(n)])}[op]()
    assert expected.tolist() == want.astype(float).tolist()
