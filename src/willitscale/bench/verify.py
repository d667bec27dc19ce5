"""Exactly checkable collective data: the buffers each op uses and what it must produce.

Every element is a small whole number, ``pattern(rank, i) = (7 i + 13 rank) mod m + 1``, with
``m`` chosen so that a sum over all ranks stays below the largest integer the dtype holds
exactly (2^24 for float32, 2^8 for bfloat16, ...). Sums, maxima and minima of such numbers are
exact in any order, so a result is either bit-identical to the expectation or wrong; the check
counts wrong elements rather than using a tolerance (as nccl-tests' verifiable data does).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from willitscale.bench.options import DTYPES
from willitscale.bench.sweep import CollectiveShape
from willitscale.collectives.ops import Op
from willitscale.errors import BenchmarkError, ConfigError

__all__ = ["Buffers", "make_buffers", "pattern_modulus", "fill_and_expect", "count_wrong",
           "buffer_modes"]

#: ops torch.distributed runs only in place (one tensor is both input and output)
ONLY_IN_PLACE = (Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE)
#: ops torch.distributed runs only out of place (no aliasing form)
ONLY_OUT_OF_PLACE = (Op.ALL_TO_ALL, Op.SEND_RECV)


def buffer_modes(op: Op, requested: list[bool]) -> list[bool]:
    """The buffer modes (``True`` = in place) of ``requested`` that ``op`` really has in
    torch.distributed; the one it has when it has none of them. A row is labelled with the mode
    it was measured in, never the one asked for."""
    available = ([True] if op in ONLY_IN_PLACE else [False] if op in ONLY_OUT_OF_PLACE
                 else [False, True])
    return [m for m in requested if m in available] or available


def pattern_modulus(dtype: str, ranks: int, redop: str) -> int:
    """The largest ``m <= 64`` whose values 1..m summed over ``ranks`` ranks stay exact."""
    exact_limit = DTYPES[dtype][1]
    if redop != "sum":
        return min(64, exact_limit)
    m = min(64, exact_limit // ranks)
    if m < 1:
        raise ConfigError(f"a sum of {dtype} over {ranks} ranks cannot be checked exactly "
                          f"(it exceeds {exact_limit}); use a wider --dtype or --check 0")
    return m


def _pattern(torch, device, dtype, rank: int, start: int, count: int, modulus: int):
    i = torch.arange(start, start + count, device=device, dtype=torch.int64)
    return ((i * 7 + rank * 13) % modulus + 1).to(dtype)


@dataclass(slots=True)
class Buffers:
    """The tensors of one op on one rank and the call that runs it once."""

    send: Any
    recv: Any
    call: Callable[[], None]


def _torch_dtype(torch, name: str):
    return getattr(torch, name)


def make_buffers(ctx, shape: CollectiveShape, dtype: str, *, in_place: bool, redop: str,
                 root: int) -> Buffers:
    """Zero-filled buffers for ``shape`` and a closure issuing the collective once; a size the
    device cannot hold is a :class:`BenchmarkError` naming it (``-b 1TB``), not a traceback."""
    try:
        return _make_buffers(ctx, shape, dtype, in_place=in_place, redop=redop, root=root)
    except (MemoryError, RuntimeError) as exc:
        if not isinstance(exc, MemoryError) and not any(
                w in str(exc).lower() for w in ("alloc", "out of memory")):
            raise
        raise BenchmarkError(cannot_allocate(ctx, shape)) from None


def cannot_allocate(ctx, shape: CollectiveShape) -> str:
    """One line: the collective and size whose buffers do not fit, and what to change."""
    from willitscale.units import format_size

    return (f"{shape.op.value} of {format_size(shape.size_bytes)}: cannot allocate its buffers "
            f"({shape.size_bytes:,} bytes each) on {ctx.device_name}; give a smaller -e/--maxbytes")


def _make_buffers(ctx, shape: CollectiveShape, dtype: str, *, in_place: bool, redop: str,
                  root: int) -> Buffers:
    torch, dist = ctx.torch, ctx.torch.distributed
    td, dev = _torch_dtype(torch, dtype), ctx.device
    n, r, op = ctx.world_size, ctx.rank, shape.op
    red = {"sum": dist.ReduceOp.SUM, "max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN}[redop]
    zeros = lambda count: torch.zeros(count, dtype=td, device=dev)  # noqa: E731
    if in_place not in buffer_modes(op, [in_place]):
        raise ConfigError("mode", "in-place" if in_place else "out-of-place",
                          f"{'out-of-place' if in_place else 'in-place'} for {op.value} "
                          "(torch.distributed has only that form of it)")
    if op in ONLY_IN_PLACE:
        t = zeros(shape.param_count)
        call = {Op.ALL_REDUCE: lambda: dist.all_reduce(t, op=red),
                Op.BROADCAST: lambda: dist.broadcast(t, root),
                Op.REDUCE: lambda: dist.reduce(t, root, op=red)}[op]
        return Buffers(send=t, recv=t, call=call)
    chunk = shape.param_count
    if op is Op.ALL_GATHER:
        gather = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor
        recv = zeros(chunk * n)
        send = recv.narrow(0, r * chunk, chunk) if in_place else zeros(chunk)
        return Buffers(send=send, recv=recv, call=lambda: gather(recv, send))
    if op is Op.REDUCE_SCATTER:
        scatter = getattr(dist, "reduce_scatter_single", None) or dist.reduce_scatter_tensor
        send = zeros(chunk * n)
        recv = send.narrow(0, r * chunk, chunk) if in_place else zeros(chunk)
        return Buffers(send=send, recv=recv, call=lambda: scatter(recv, send, op=red))
    if op is Op.ALL_TO_ALL:
        send, recv = zeros(chunk * n), zeros(chunk * n)
        return Buffers(send=send, recv=recv, call=lambda: dist.all_to_all_single(recv, send))
    if op is Op.SEND_RECV:
        send, recv = zeros(chunk), zeros(chunk)
        peer_to, peer_from = (r + 1) % n, (r - 1) % n

        def send_recv() -> None:
            ops = [dist.P2POp(dist.isend, send, peer_to), dist.P2POp(dist.irecv, recv, peer_from)]
            for work in dist.batch_isend_irecv(ops):
                work.wait()

        return Buffers(send=send, recv=recv, call=send_recv)
    raise AssertionError(op)  # pragma: no cover


def _combine(torch, values: Iterator, redop: str):
    """Reduce the patterns one at a time: at most two full buffers live at once, not one per
    rank (128 ranks x 1 GB would not fit on a GPU)."""
    out = next(values).clone()
    for v in values:
        if redop == "sum":
            out += v
        elif redop == "max":
            torch.maximum(out, v, out=out)
        else:
            torch.minimum(out, v, out=out)
    return out


def _concat(torch, chunks: Iterator, like, count: int):
    """Concatenate the per-rank chunks into one preallocated buffer, one chunk at a time."""
    out = torch.empty(count, dtype=like.dtype, device=like.device)
    start = 0
    for c in chunks:
        out.narrow(0, start, c.numel()).copy_(c)
        start += c.numel()
    return out


def fill_and_expect(ctx, bufs: Buffers, shape: CollectiveShape, dtype: str, *, redop: str,
                    root: int):
    """Write this rank's pattern into the input; return the exact expected output (or None
    when this rank's output is undefined, e.g. a non-root rank of reduce)."""
    torch = ctx.torch
    td, dev, n, r, op = _torch_dtype(torch, dtype), ctx.device, ctx.world_size, ctx.rank, shape.op
    m = pattern_modulus(dtype, n, redop)
    pat = lambda rank, start, count: _pattern(torch, dev, td, rank, start, count, m)  # noqa: E731
    chunk = shape.param_count
    if op in (Op.ALL_REDUCE, Op.REDUCE):
        bufs.send.copy_(pat(r, 0, chunk))
        if op is Op.REDUCE and r != root:
            return None
        return _combine(torch, (pat(q, 0, chunk) for q in range(n)), redop)
    if op is Op.BROADCAST:
        bufs.send.copy_(pat(r, 0, chunk))
        return pat(root, 0, chunk)
    if op is Op.ALL_GATHER:
        bufs.send.copy_(pat(r, 0, chunk))
        return _concat(torch, (pat(q, 0, chunk) for q in range(n)), bufs.recv, chunk * n)
    if op is Op.REDUCE_SCATTER:
        bufs.send.copy_(pat(r, 0, chunk * n))
        return _combine(torch, (pat(q, r * chunk, chunk) for q in range(n)), redop)
    if op is Op.ALL_TO_ALL:
        bufs.send.copy_(pat(r, 0, chunk * n))
        return _concat(torch, (pat(q, r * chunk, chunk) for q in range(n)), bufs.recv, chunk * n)
    if op is Op.SEND_RECV:
        bufs.send.copy_(pat(r, 0, chunk))
        return pat((r - 1) % n, 0, chunk)
    raise AssertionError(op)  # pragma: no cover


def count_wrong(ctx, bufs: Buffers, expected) -> int:
    """Elements of this rank's output that differ from ``expected`` (0 when undefined)."""
    if expected is None:
        return 0
    ctx.sync()
    return int((bufs.recv != expected).sum().item())
