"""The bandwidth benchmark: what HBM bandwidth the memory-bound kernels of a training step reach
(torch, inside a worker).

Each op's bytes are counted from its operands (``e`` elements of ``w`` bytes; AdamW's state in
float32 as torch keeps it), not measured:

* ``copy``: ``y.copy_(x)`` reads ``e w``, writes ``e w``: ``2 e w``;
* ``add``: ``torch.add(a, b, out=c)``: ``3 e w``;
* ``gelu``: ``gelu(x)`` (tanh form) reads ``e w``, writes a new ``e w``: ``2 e w``;
* ``layer_norm``: over rows of ``hidden``, with weight and bias: reads ``e w``, writes ``e w``
  (the per-row statistics and the ``hidden``-long parameters are negligible): ``2 e w``;
* ``adamw``: one fused AdamW step over ``e`` float32 parameters (``torch.optim.AdamW(fused=True)``
  on a GPU, ``foreach`` on a CPU): reads parameter, gradient, two moments and writes parameter
  and two moments: ``7 x 4 e`` bytes (the dtype option does not apply: optimizer state is fp32).
"""

from __future__ import annotations

from collections.abc import Callable

from willitscale.bench.kernel_options import BandwidthOptions
from willitscale.bench.kernel_timer import time_calls
from willitscale.bench.ranks.progress import progress
from willitscale.errors import BenchmarkError
from willitscale.results.kernel_records import BandwidthRow

__all__ = ["run_bandwidth", "bytes_moved"]

#: (bytes per element of the op's dtype moved per element) for each op but adamw
_TRAFFIC = {"copy": 2, "add": 3, "gelu": 2, "layer_norm": 2}
ADAMW_FP32_ACCESSES = 7  #: param, grad, exp_avg, exp_avg_sq read; param, exp_avg, exp_avg_sq written


def bytes_moved(op: str, elements: int, element_bytes: int) -> int:
    """Bytes one call reads plus writes (module docstring)."""
    if op == "adamw":
        return ADAMW_FP32_ACCESSES * 4 * elements
    return _TRAFFIC[op] * element_bytes * elements


def _call(ctx, op: str, elements: int, opts: BandwidthOptions) -> tuple[Callable[[], object], str]:
    torch, dev = ctx.torch, ctx.device
    dtype = getattr(torch, opts.dtype)
    F = torch.nn.functional
    if op == "copy":
        x, y = torch.randn(elements, device=dev, dtype=dtype), torch.empty(elements, device=dev, dtype=dtype)
        return (lambda: y.copy_(x)), opts.dtype
    if op == "add":
        a, b = (torch.randn(elements, device=dev, dtype=dtype) for _ in range(2))
        c = torch.empty_like(a)
        return (lambda: torch.add(a, b, out=c)), opts.dtype
    if op == "gelu":
        x = torch.randn(elements, device=dev, dtype=dtype)
        return (lambda: F.gelu(x, approximate="tanh")), opts.dtype
    if op == "layer_norm":
        rows = max(1, elements // opts.hidden)
        x = torch.randn(rows, opts.hidden, device=dev, dtype=dtype)
        norm = torch.nn.LayerNorm(opts.hidden, device=dev, dtype=dtype)
        return (lambda: norm(x)), opts.dtype
    param = torch.nn.Parameter(torch.randn(elements, device=dev))
    param.grad = torch.randn_like(param)
    fused = {"fused": True} if ctx.is_cuda else {"foreach": True}
    optimizer = torch.optim.AdamW([param], lr=1e-4, **fused)
    return optimizer.step, "float32"


def run_bandwidth(ctx, opts: BandwidthOptions, emit: Callable[[BandwidthRow], None]) -> None:
    torch = ctx.torch
    total = len(opts.ops) * len(opts.sizes)
    with progress(total, "bandwidth", show=ctx.rank == 0) as bar, torch.no_grad():
        for op in opts.ops:
            for elements in opts.sizes:
                what = f"bandwidth {op} {elements} elements"
                bar.describe(what)
                ctx.heartbeat.enter(what, waits=False)
                try:
                    call, dtype = _call(ctx, op, elements, opts)
                    for _ in range(opts.warmup):
                        call()
                    ctx.sync()
                except RuntimeError as exc:
                    raise BenchmarkError(f"{what} failed on {ctx.device_name}: {exc}") from None
                local = time_calls(ctx, call, opts.iters)
                ctx.heartbeat.enter(f"{what}: the slowest rank's time")
                seconds = ctx.reduce_time(local, "max")
                width = torch.empty((), dtype=getattr(torch, dtype)).element_size()
                if op == "layer_norm":
                    elements = max(1, elements // opts.hidden) * opts.hidden
                emit(BandwidthRow(op=op, elements=elements, dtype=dtype,
                                  size_bytes=bytes_moved(op, elements, width),
                                  device=ctx.device_name, time=seconds))
                del call
                bar.advance()
