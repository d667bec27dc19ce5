"""FP8 products as FP8 training runs them: ``torch._scaled_mm`` on E4M3 operands with float32
scales and a bfloat16 output (torch, inside a worker).

Two scalings (torchao's float8 recipes name them the same way): ``tensorwise`` -- one scale for
all of A and one for all of B; ``rowwise`` -- one scale per row of A (``m x 1``) and per column
of B (``1 x n``). ``_scaled_mm`` wants B column-major: B is made as ``(n x k)`` and transposed,
which is a view, not a copy. The scales are 1.0 (their values do not change the kernel's work;
the casts and amax reductions that compute them in training are memory-bound work, timed by
``bench bandwidth``, not here).
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["scaled_product"]


def scaled_product(ctx, dtype: str, shape: tuple[int, int, int], generator) -> Callable[[], object]:
    torch = ctx.torch
    m, n, k = shape
    fp8 = torch.float8_e4m3fn
    a = torch.randn(m, k, device=ctx.device, generator=generator).to(fp8)
    b = torch.randn(n, k, device=ctx.device, generator=generator).to(fp8).t()
    if dtype.endswith("rowwise"):
        scale_a = torch.ones(m, 1, device=ctx.device, dtype=torch.float32)
        scale_b = torch.ones(1, n, device=ctx.device, dtype=torch.float32)
    else:
        scale_a = scale_b = torch.ones((), device=ctx.device, dtype=torch.float32)
    return lambda: torch._scaled_mm(a, b, scale_a=scale_a, scale_b=scale_b, out_dtype=torch.bfloat16)
