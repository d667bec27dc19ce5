"""Timing back-to-back kernel calls on one device: CUDA events on a GPU, ``perf_counter`` on a
CPU (torch, imported by the caller).

On a GPU the host runs ahead of the kernels it queues, so a host clock around a loop measures
the queueing unless it synchronises; CUDA events are recorded on the stream itself, before the
first call and after the last, and ``elapsed_time`` is the device's time between them (ms). On
a CPU every call returns when its work is done, so a host clock is exact.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["time_calls"]


def time_calls(ctx, fn: Callable[[], object], iters: int) -> float:
    """Seconds per call of ``fn`` over ``iters`` calls in a row, after a barrier."""
    ctx.barrier()
    if ctx.is_cuda:
        cuda = ctx.torch.cuda
        start, end = cuda.Event(enable_timing=True), cuda.Event(enable_timing=True)
        start.record()
        for _ in range(iters):
            fn()
        end.record()
        end.synchronize()
        return start.elapsed_time(end) / 1e3 / iters
    begin = ctx.clock()
    for _ in range(iters):
        fn()
    return (ctx.clock() - begin) / iters
