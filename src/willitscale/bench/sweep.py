"""The message sizes of a collective sweep and the element counts each op uses (pure, no torch).

This follows nccl-tests (``src/common.cu``, ``setupArgs`` and each test's
``GetCollByteCount``): sizes run from ``min_bytes`` to ``max_bytes``, multiplied by ``factor``
(or increased by ``step_bytes`` when no factor is given); each size becomes an element count
``size // element_size`` that is then rounded down to what the operation and the rank count
allow (all_gather sends ``count // n`` elements per rank, all_to_all a 16-byte aligned chunk per
peer, ...). The size reported for a row is the real one after rounding: ``max(send, recv)``
bytes, which is also the ``S`` of nccl-tests' ``algbw = S / t``.

Unlike nccl-tests we parse sizes with :mod:`willitscale.units`: ``1MB`` is 10^6 bytes and
``1MiB`` is 2^20 bytes (nccl-tests reads ``1M`` as 2^20).
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError

__all__ = ["sweep_sizes", "sweep_end_note", "CollectiveShape", "collective_shape", "MAX_SWEEP_POINTS"]

#: A sweep longer than this is almost certainly a mistake (``-f 1`` with a tiny step).
MAX_SWEEP_POINTS = 10_000

#: nccl-tests aligns each all_to_all chunk to 16 bytes (``count/nranks & -(16/eltSize)``).
ALL_TO_ALL_ALIGN_BYTES = 16


def sweep_sizes(min_bytes: int, max_bytes: int, *, factor: float | None = 2.0,
                step_bytes: int | None = None) -> list[int]:
    """Sizes from ``min_bytes`` to ``max_bytes`` inclusive: geometric by ``factor``, or
    arithmetic by ``step_bytes`` when ``factor`` is None (nccl-tests' ``-f`` and ``-i``)."""
    if min_bytes < 1:
        raise ConfigError("min_bytes", min_bytes, "a size of at least 1 byte")
    if max_bytes < min_bytes:
        raise ConfigError("max_bytes", max_bytes, f"a size >= min_bytes = {min_bytes}")
    if factor is not None and factor <= 1 and max_bytes > min_bytes:
        raise ConfigError("factor", factor, "a number > 1 (or give step_bytes instead)")
    if factor is None and (step_bytes is None or step_bytes < 1):
        raise ConfigError("step_bytes", step_bytes, "a size >= 1 byte when no factor is given")
    sizes: list[int] = []
    size = float(min_bytes)
    while size <= max_bytes:
        sizes.append(int(size))
        if len(sizes) > MAX_SWEEP_POINTS:
            raise ConfigError(f"the sweep from {min_bytes} to {max_bytes} bytes has more than "
                              f"{MAX_SWEEP_POINTS} sizes: use a larger factor or step")
        size = size * factor if factor is not None else size + step_bytes
        if factor is not None and max_bytes == min_bytes:
            break
    return sizes


def sweep_end_note(min_bytes: int, max_bytes: int, *, factor: float | None = 2.0,
                   step_bytes: int | None = None) -> str | None:
    """A note when the sweep's last size falls short of ``max_bytes`` (``-b 1KB -e 1MB`` doubles
    1,000 B up to 512,000 B: the next size, 1,024,000 B, is past 1 MB), else None. The sizes are
    nccl-tests'; the note is there because its users expect ``-e`` to be the last row."""
    from willitscale.units import format_size

    sizes = sweep_sizes(min_bytes, max_bytes, factor=factor, step_bytes=step_bytes)
    if sizes[-1] >= max_bytes:
        return None
    how = f"x{factor:g}" if factor is not None else f"+{step_bytes:,} B"
    return (f"note: the last size is {format_size(sizes[-1])} ({sizes[-1]:,} B), below -e "
            f"{format_size(max_bytes)} ({max_bytes:,} B): sizes go {how} from -b; give -e as one "
            "of them (e.g. -b 1KiB -e 1MiB) to measure it")


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveShape:
    """Element counts of one collective call on one rank, as nccl-tests sets them up."""

    op: Op
    ranks: int
    element_size: int  #: bytes per element
    send_count: int  #: elements each rank sends (its input buffer)
    recv_count: int  #: elements each rank receives (its output buffer)
    param_count: int  #: the ``count`` argument of the NCCL call, printed in the count column

    @property
    def size_bytes(self) -> int:
        """The operation's size S: ``max(send, recv)`` bytes (all_gather: the gathered output)."""
        return max(self.send_count, self.recv_count) * self.element_size

    @property
    def chunk_count(self) -> int:
        """Elements per rank-sized piece (all_gather/reduce_scatter/all_to_all), else all."""
        return self.param_count


def collective_shape(op: Op, size_bytes: int, element_size: int, ranks: int) -> CollectiveShape:
    """Round ``size_bytes`` to the counts ``op`` can use over ``ranks`` ranks (at least one
    element per rank, so the smallest sizes are rounded up rather than dropped)."""
    op = Op(op)
    if ranks < 1:
        raise ConfigError("ranks", ranks, "an integer >= 1")
    if op is Op.SEND_RECV and ranks < 2:
        raise ConfigError("ranks", ranks, "at least 2 ranks for send_recv")
    count = max(1, size_bytes // element_size)
    if op in (Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE, Op.SEND_RECV):
        send = recv = param = count
    elif op is Op.ALL_GATHER:
        param = send = max(1, count // ranks)
        recv = param * ranks
    elif op is Op.REDUCE_SCATTER:
        param = recv = max(1, count // ranks)
        send = param * ranks
    elif op is Op.ALL_TO_ALL:
        align = max(1, ALL_TO_ALL_ALIGN_BYTES // element_size)
        param = max(align, (count // ranks) // align * align)
        send = recv = param * ranks
    else:  # pragma: no cover - Op is closed
        raise AssertionError(op)
    return CollectiveShape(op=op, ranks=ranks, element_size=element_size,
                           send_count=send, recv_count=recv, param_count=param)
