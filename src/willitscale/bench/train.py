"""The training benchmark: one DDP step of a GPT-2-family model, and its parts.

After ``warmup`` steps (DDP rebuilds its gradient buckets after the first), the benchmark
alternates ``steps`` synchronising steps with ``steps`` steps under ``DDP.no_sync()`` (same
forward and backward, no gradient all-reduce). Every step starts after a barrier and times,
with the device synchronised at each boundary:

* forward (the loss), backward, and optimizer (``AdamW.step`` + ``zero_grad``; skipped in the
  no_sync steps, whose gradients are local);
* exposed communication = backward of a synchronising step - backward of a no_sync step: the
  part of the gradient all-reduce the backward pass did not hide.

Peak memory: on CUDA, ``torch.cuda.max_memory_allocated`` and ``max_memory_reserved`` over the
measured steps (the peak counters are reset after the warm-up, so the optimizer's states exist
already: a steady step, as "The Impact of GPU Networking (Part 1)" read its peaks), the largest
of any rank. PyTorch keeps no such counters for the CPU: the row records None there.

Like with like: a synchronising backward ends when the slowest rank's gradients are reduced,
so the no_sync backward ends with a barrier (it ends when the slowest rank is done). Without
it, the ranks' skew -- a rank that started or computed late makes the others wait in the
all-reduce: milliseconds on a busy machine -- would count as communication, though no byte
causes it and a faster network would not remove it.

Each step's parts are those of its slowest rank (the one whose step took longest), so they add
up to the step. (The slowest rank of each part separately would count the same skew twice: once
in the forward of the rank that was late, again in the backward of the rank that waited for
it.) A row reports, per part, the mean over steps -- as nccl-tests divides the time of ``iters``
ops, and because a training run's throughput is its mean step. Means add up, medians do not:
with the mean, step = forward + backward + optimizer exactly, and exposed communication is the
mean extra backward time of the synchronising steps. (On a busy machine, whose step times are
skewed by preemptions, the median step exceeded the sum of the median parts by up to ~10%,
which an estimate built from the parts cannot reproduce.)
"""

from __future__ import annotations

import gc
import statistics
from collections.abc import Callable
from contextlib import nullcontext

from willitscale.bench.gpt import batches, load_text
from willitscale.bench.models import bench_model, build_bench_model
from willitscale.bench.options import TrainOptions
from willitscale.bench.ranks.progress import progress
from willitscale.results.records import TrainRow

__all__ = ["run_train"]

LEARNING_RATE = 3e-4


def _build(ctx, opts: TrainOptions):
    torch = ctx.torch
    from torch.nn.parallel import DistributedDataParallel

    torch.manual_seed(opts.seed)  # same initial weights on every rank (DDP also broadcasts them)
    model = build_bench_model(bench_model(opts.model)).to(ctx.device)
    ddp = DistributedDataParallel(
        model, device_ids=[ctx.local_rank] if ctx.is_cuda else None,
        bucket_cap_mb=opts.bucket_bytes / 2**20, gradient_as_bucket_view=True)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=LEARNING_RATE)
    return ddp, optimizer


def _autocast(ctx, dtype: str):
    if dtype == "float32":
        return nullcontext()
    return ctx.torch.autocast(device_type=ctx.device.type, dtype=getattr(ctx.torch, dtype))


def _step(ctx, ddp, optimizer, data, opts: TrainOptions, *, sync: bool) -> tuple[float, float, float]:
    """One step; returns this rank's (forward, backward, optimizer) seconds."""
    beat, kind = ctx.heartbeat, f"train {opts.model} step{'' if sync else ' under no_sync'}"
    x, y = next(data)
    ctx.barrier()
    beat.enter(f"{kind}: forward", waits=False)  # this rank's own work
    t0 = ctx.clock()
    with nullcontext() if sync else ddp.no_sync():
        with _autocast(ctx, opts.dtype):
            loss = ddp(x, y)
        ctx.sync()
        t1 = ctx.clock()
        beat.enter(f"{kind}: backward" + (" and gradient all-reduce" if sync else ""))
        loss.backward()
        if not sync:  # end when every rank is done, as the gradient all-reduce does
            ctx.barrier()
        ctx.sync()
        t2 = ctx.clock()
    beat.enter(f"{kind}: optimizer", waits=False)
    if sync:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    ctx.sync()
    t3 = ctx.clock()
    return t1 - t0, t2 - t1, t3 - t2


def _reset_peak_memory(ctx) -> None:
    if ctx.is_cuda:
        ctx.torch.cuda.reset_peak_memory_stats(ctx.device)


def _peak_memory(ctx) -> tuple[int | None, int | None]:
    """``(max allocated, max reserved)`` bytes since the reset, the largest of any rank; None
    on CPU."""
    if not ctx.is_cuda:
        return None, None
    cuda = ctx.torch.cuda
    everyone = ctx.gather_objects((int(cuda.max_memory_allocated(ctx.device)),
                                   int(cuda.max_memory_reserved(ctx.device))))
    return max(a for a, _ in everyone), max(r for _, r in everyone)


def _slowest_rank_means(ctx, local: list[tuple[float, ...]]) -> list[float]:
    """The mean over steps of each part, every step's parts taken from its slowest rank (the
    largest sum of parts); they add up to the mean step time of the slowest rank."""
    everyone = ctx.gather_objects(local)
    slowest = [max((rank_times[s] for rank_times in everyone), key=sum) for s in range(len(local))]
    return [statistics.fmean(step[part] for step in slowest) for part in range(len(local[0]))]


def _first_bucket_bytes(ctx, ddp, opts: TrainOptions) -> int:
    """The cap DDP gave the first bucket. torch 2.13 (``_BucketCapacityConfig``) applies an
    explicit ``bucket_cap_mb`` -- which this benchmark always passes -- to the first bucket too,
    and keeps ``dist._DEFAULT_FIRST_BUCKET_BYTES`` (1 MiB) only for the default cap; torch
    versions with ``bucket_bytes_cap_default`` do the same; older ones always used 1 MiB."""
    default = int(ctx.torch.distributed._DEFAULT_FIRST_BUCKET_BYTES)
    config = getattr(ddp, "_bucket_config", None)
    if config is not None and hasattr(config, "first_bucket_bytes_cap"):
        return int(config.first_bucket_bytes_cap)
    if getattr(ddp, "bucket_bytes_cap_default", True) is False:
        return opts.bucket_bytes
    return default


def _params(shape) -> int:
    from willitscale.workload.params import param_count

    return param_count(shape).total


def run_train(ctx, opts: TrainOptions, emit: Callable[[TrainRow], None], *, nodes: int) -> None:
    shape = bench_model(opts.model)
    ctx.heartbeat.enter(f"train {opts.model}: building the model and DDP")
    ddp, optimizer = _build(ctx, opts)
    data = batches(load_text(), seq_len=opts.seq_len, batch=opts.batch,
                   seed=opts.seed * 100_003 + ctx.rank, device=ctx.device)
    synced: list[tuple[float, ...]] = []
    unsynced: list[tuple[float, ...]] = []
    with progress(opts.warmup + 2 * opts.steps, f"train {opts.model}", show=ctx.rank == 0) as bar:
        for _ in range(opts.warmup):
            _step(ctx, ddp, optimizer, data, opts, sync=True)
            bar.advance()
        _reset_peak_memory(ctx)
        for _ in range(opts.steps):
            fwd, bwd, opt = _step(ctx, ddp, optimizer, data, opts, sync=True)
            synced.append((fwd, bwd, opt))
            bar.advance()
            unsynced.append(_step(ctx, ddp, optimizer, data, opts, sync=False)[:2])
            bar.advance()
    fwd, bwd, opt = _slowest_rank_means(ctx, synced)
    bwd_no_sync = _slowest_rank_means(ctx, unsynced)[1]
    first_bucket = _first_bucket_bytes(ctx, ddp, opts)
    peak_allocated, peak_reserved = _peak_memory(ctx)
    # DDP's reducer holds the process group: free it now, not during interpreter shutdown
    # (where Gloo's threads can be torn down in the wrong order and abort the process)
    del ddp, optimizer, data
    gc.collect()
    emit(TrainRow(model=opts.model, layers=shape.layers, hidden=shape.hidden, heads=shape.heads,
                  vocab=shape.vocab, seq_len=opts.seq_len, params=_params(shape),
                  batch_per_rank=opts.batch, ranks=ctx.world_size, nodes=nodes, dtype=opts.dtype,
                  bucket_bytes=opts.bucket_bytes, device=ctx.device_name, step=fwd + bwd + opt, forward=fwd,
                  backward=bwd, backward_no_sync=bwd_no_sync, optimizer=opt, steps=opts.steps,
                  first_bucket_bytes=first_bucket, peak_allocated_bytes=peak_allocated,
                  peak_reserved_bytes=peak_reserved))
