"""The attention benchmark: PyTorch's ``scaled_dot_product_attention`` per backend, forward and
backward, over causality, head dimensions and sequence lengths (torch, inside a worker).

Each backend is forced with ``torch.nn.attention.sdpa_kernel([backend])``. A backend that cannot
run a shape (no kernel for this device, dtype or head dim; out of memory) gives a row with status
``unsupported`` and torch's reason -- the warnings it emits naming why a kernel was not used, and
the error -- never a crash. The unfused MATH backend, which stores the ``s x s`` scores, is
``skipped`` above ``math_max_seq``. FLOP counts: :func:`willitscale.results.kernel_records.attention_flops`.

The inputs require gradients (a training forward: the kernel saves what its backward needs).
The backward is timed as ``torch.autograd.grad`` of one forward's output, the graph kept
(``retain_graph``): the backward kernels only, no forward, no gradient accumulation.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

from willitscale.bench.kernel_options import AttentionOptions
from willitscale.bench.kernel_timer import time_calls
from willitscale.bench.ranks.progress import progress
from willitscale.results.kernel_records import AttentionRow

__all__ = ["run_attention"]


def _reason(exc: BaseException, caught: list) -> str:
    said = [str(w.message).strip() for w in caught if str(w.message).strip()]
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    return "; ".join(dict.fromkeys([*said, f"{type(exc).__name__}: {first}"]))[:2000]


def _calls(torch, q, k, v, causal: bool, direction: str) -> Callable[[], object]:
    """The call to time. Inputs require gradients in both passes: a training forward (a kernel
    may take another path, or skip saving its statistics, when no backward will follow)."""
    sdpa = torch.nn.functional.scaled_dot_product_attention
    q, k, v = (t.detach().requires_grad_() for t in (q, k, v))
    if direction == "forward":
        return lambda: sdpa(q, k, v, is_causal=causal)
    out = sdpa(q, k, v, is_causal=causal)
    grad = torch.randn_like(out)
    return lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)


def _measure(ctx, opts: AttentionOptions, backend: str, shape: tuple, causal: bool,
             direction: str) -> tuple[str, str, float | None]:
    """``(status, reason, local seconds per call)`` of one point on this rank."""
    torch = ctx.torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    batch, heads, seq, dim = shape
    if backend == "MATH" and seq > opts.math_max_seq:
        return "skipped", f"MATH runs only up to --math-max-seq {opts.math_max_seq}", None
    q = k = v = None
    caught: list = []
    try:
        with warnings.catch_warnings(record=True) as caught, sdpa_kernel([getattr(SDPBackend, backend)]):
            warnings.simplefilter("always")
            q, k, v = (torch.randn(batch, heads, seq, dim, device=ctx.device,
                                   dtype=getattr(torch, opts.dtype)) for _ in range(3))
            call = _calls(torch, q, k, v, causal, direction)
            for _ in range(opts.warmup):
                call()
            ctx.sync()
            return "ok", "", time_calls(ctx, call, opts.iters)
    except (RuntimeError, NotImplementedError, ValueError) as exc:  # OOM is a RuntimeError
        return "unsupported", _reason(exc, caught), None
    finally:
        del q, k, v
        if ctx.is_cuda:
            torch.cuda.empty_cache()


def _points(opts: AttentionOptions):
    for dim in opts.head_dims:
        for causal in opts.causal:
            for seq in opts.seq_lens:
                for backend in opts.backends:
                    for direction in opts.directions:
                        yield backend, (opts.batch_for(seq), opts.hidden // dim, seq, dim), causal, direction


def run_attention(ctx, opts: AttentionOptions, emit: Callable[[AttentionRow], None]) -> None:
    points = list(_points(opts))
    with progress(len(points), "attention", show=ctx.rank == 0) as bar:
        for backend, shape, causal, direction in points:
            batch, heads, seq, dim = shape
            what = (f"attention {backend} {direction} {'causal' if causal else 'full'} "
                    f"b{batch} h{heads} s{seq} d{dim}")
            bar.describe(what)
            ctx.heartbeat.enter(what, waits=False)
            status, reason, local = _measure(ctx, opts, backend, shape, causal, direction)
            # every rank runs the same points, so every rank takes the same branch here
            ctx.heartbeat.enter(f"{what}: the slowest rank's time")
            seconds = ctx.reduce_time(local, "max") if status == "ok" else None
            emit(AttentionRow(backend=backend, direction=direction, causal=causal,
                              dtype=opts.dtype, batch=batch, heads=heads, seq_len=seq,
                              head_dim=dim, device=ctx.device_name, status=status,
                              reason=reason, time=seconds))
            bar.advance()
