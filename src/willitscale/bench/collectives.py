"""The collective benchmark: nccl-tests' sweep and timing over torch.distributed.

For each op: warm up (``warmup`` ops at the largest and at the smallest size, as nccl-tests
does), then for each size and buffer mode:

1. one untimed op, then a barrier (host and device idle on every rank);
2. start the host timer, issue ``iters`` ops back to back, synchronise the device, stop;
3. divide by ``iters`` and combine the ranks' times (``max`` by default: a collective is as
   slow as its slowest rank; nccl-tests' own default is the mean);
4. refill the input with exactly checkable data, run the op once more and count the wrong
   elements on every rank, summed.

The timed ops run on zero-filled buffers: the values do not change how long a sum takes, and
zeros keep repeated in-place sums from overflowing. busbw uses nccl-tests' factors
(:mod:`willitscale.collectives.metrics`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from willitscale.bench.options import DTYPES, CollectiveOptions
from willitscale.bench.ranks.progress import progress
from willitscale.bench.sweep import CollectiveShape, collective_shape, sweep_sizes
from willitscale.bench.verify import (
    buffer_modes,
    count_wrong,
    fill_and_expect,
    make_buffers,
)
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError
from willitscale.results.records import CollectiveRow

__all__ = ["run_collectives", "sweep_shapes"]

REDUCING_OPS = (Op.ALL_REDUCE, Op.REDUCE, Op.REDUCE_SCATTER)
ROOTED_OPS = (Op.BROADCAST, Op.REDUCE)


def sweep_shapes(op: Op, opts: CollectiveOptions, ranks: int) -> list[CollectiveShape]:
    """The distinct shapes of the sweep for ``op`` (sizes that round to the same counts are
    measured once)."""
    elt = DTYPES[opts.dtype][0]
    shapes: list[CollectiveShape] = []
    for size in sweep_sizes(opts.min_bytes, opts.max_bytes, factor=opts.factor,
                            step_bytes=opts.step_bytes):
        shape = collective_shape(op, size, elt, ranks)
        if not shapes or shape != shapes[-1]:
            shapes.append(shape)
    return shapes


def _what(shape: CollectiveShape, in_place: bool) -> str:
    """``all_reduce 65,536 B out-of-place``: the op a rank is in, for its heartbeat."""
    return f"{shape.op.value} {shape.size_bytes:,} B {'in-place' if in_place else 'out-of-place'}"


def _warmup(ctx, opts: CollectiveOptions, shape: CollectiveShape, in_place: bool) -> None:
    if opts.warmup == 0:
        return
    bufs = make_buffers(ctx, shape, opts.dtype, in_place=in_place, redop=opts.redop,
                        root=opts.root)
    ctx.heartbeat.enter(f"{_what(shape, in_place)}: warm-up")
    for _ in range(opts.warmup):
        bufs.call()
        ctx.heartbeat.tick()
    ctx.sync()


def measure(ctx, opts: CollectiveOptions, shape: CollectiveShape, in_place: bool) -> CollectiveRow:
    """One row: time ``iters`` back-to-back ops of ``shape``, then check one exactly.

    Each op of the timed loop ticks the heartbeat: one store into shared memory (~0.2 us
    here), beside the smallest op timed (tens of us with Gloo; a CUDA op's launch is queued,
    and the tick overlaps the GPU's work)."""
    bufs = make_buffers(ctx, shape, opts.dtype, in_place=in_place, redop=opts.redop,
                        root=opts.root)
    beat, what = ctx.heartbeat, _what(shape, in_place)
    beat.enter(f"{what}: first op")
    bufs.call()
    ctx.barrier()
    beat.enter(f"{what}: timed ops")
    start = ctx.clock()
    for _ in range(opts.iters):
        bufs.call()
        beat.tick()
    ctx.sync()
    elapsed = (ctx.clock() - start) / opts.iters
    seconds = ctx.reduce_time(elapsed, opts.time_reduce)
    wrong = 0
    if opts.check:
        beat.enter(f"{what}: correctness check")
        expected = fill_and_expect(ctx, bufs, shape, opts.dtype, redop=opts.redop, root=opts.root)
        ctx.barrier()
        bufs.call()
        wrong = ctx.sum_int(count_wrong(ctx, bufs, expected))
    op = shape.op
    return CollectiveRow(op=op, size_bytes=shape.size_bytes, count=shape.param_count,
                         dtype=opts.dtype, redop=opts.redop if op in REDUCING_OPS else "none",
                         root=opts.root if op in ROOTED_OPS else -1, in_place=in_place,
                         ranks=ctx.world_size, time=seconds, wrong=wrong)


def _check_ranks(ctx, opts: CollectiveOptions) -> None:
    if opts.root >= ctx.world_size:
        raise ConfigError("root", opts.root, f"a rank below the world size {ctx.world_size}")
    if Op.SEND_RECV in opts.op_list and ctx.world_size < 2:
        raise ConfigError("ops", "send_recv", "at least 2 ranks (use --nproc 2 or more)")


def run_collectives(ctx, opts: CollectiveOptions, emit: Callable[[CollectiveRow], None]) -> None:
    """Run the sweep; ``emit`` receives each row as soon as it is measured (on every rank)."""
    _check_ranks(ctx, opts)
    plan = []
    for op in opts.op_list:
        modes = buffer_modes(op, opts.in_place_modes)
        if modes != opts.in_place_modes and ctx.rank == 0:
            only = "in place" if modes == [True] else "out of place"
            print(f"note: torch.distributed runs {op.value} only {only}; its rows are measured "
                  f"and labelled {only}", file=sys.stderr)
        plan.append((op, sweep_shapes(op, opts, ctx.world_size), modes))
    total = sum(len(shapes) * len(modes) for _, shapes, modes in plan)
    with progress(total, "collectives", show=ctx.rank == 0) as bar:
        for op, shapes, modes in plan:
            bar.describe(f"{op.value} warm-up")
            _warmup(ctx, opts, shapes[-1], modes[0])
            _warmup(ctx, opts, shapes[0], modes[0])
            for shape in shapes:
                for in_place in modes:
                    bar.describe(f"{op.value} {shape.size_bytes:,} B")
                    emit(measure(ctx, opts, shape, in_place))
                    bar.advance()
