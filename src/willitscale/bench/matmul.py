"""The matmul benchmark: achieved FLOP/s of ``(m x k) @ (k x n)`` over sizes and dtypes.

Each rank multiplies on its own device at the same time (as the ranks of a training job do);
a row's time is the slowest rank's. FLOPs per product: ``2 m n k`` (one multiply and one add
per term of each of the ``m n`` dot products of length ``k``).
"""

from __future__ import annotations

from collections.abc import Callable

from willitscale.bench.options import MatmulOptions
from willitscale.bench.ranks.progress import progress
from willitscale.errors import BenchmarkError
from willitscale.results.records import MatmulRow

__all__ = ["run_matmul"]


def _product(ctx, dtype: str, shape: tuple[int, int, int], generator) -> Callable[[], object]:
    """One ``(m x k) @ (k x n)`` product of ``dtype``, its operands made, ready to call."""
    if dtype.startswith("float8"):
        from willitscale.bench.scaled_mm import scaled_product

        return scaled_product(ctx, dtype, shape, generator)
    torch = ctx.torch
    m, n, k = shape
    td = getattr(torch, dtype)
    a = torch.randn(m, k, device=ctx.device, generator=generator).to(td)
    b = torch.randn(k, n, device=ctx.device, generator=generator).to(td)
    out = torch.empty(m, n, device=ctx.device, dtype=td)
    return lambda: torch.matmul(a, b, out=out)


def _time_products(ctx, product, iters: int, what: str) -> float:
    ctx.barrier()
    ctx.heartbeat.enter(f"{what}: timed products", waits=False)  # this rank's own work
    start = ctx.clock()
    for _ in range(iters):
        product()
    ctx.sync()
    return (ctx.clock() - start) / iters


def run_matmul(ctx, opts: MatmulOptions, emit: Callable[[MatmulRow], None]) -> None:
    torch = ctx.torch
    generator = torch.Generator(device=ctx.device).manual_seed(ctx.rank)
    total = len(opts.dtypes) * len(opts.shapes)
    with progress(total, "matmul", show=ctx.rank == 0) as bar:
        for dtype in opts.dtypes:
            for m, n, k in opts.shapes:
                what = f"matmul {dtype} {m}x{n}x{k}"
                bar.describe(what)
                ctx.heartbeat.enter(f"{what}: warm-up", waits=False)
                try:
                    product = _product(ctx, dtype, (m, n, k), generator)
                    for _ in range(opts.warmup):
                        product()
                    ctx.sync()
                except RuntimeError as exc:
                    raise BenchmarkError(f"matmul of {dtype} {m}x{n}x{k} failed on "
                                         f"{ctx.device_name}: {exc}") from None
                local = _time_products(ctx, product, opts.iters, what)
                ctx.heartbeat.enter(f"{what}: the slowest rank's time")
                seconds = ctx.reduce_time(local, "max")
                emit(MatmulRow(m=m, n=n, k=k, dtype=dtype, device=ctx.device_name, time=seconds))
                bar.advance()
