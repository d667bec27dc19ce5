"""nccl-tests' performance metrics: algorithm bandwidth and bus bandwidth.

From nccl-tests ``doc/PERFORMANCE.md``: ``algbw = S / t`` where ``S`` is the operation's size
(for all_gather the total gathered output, for reduce_scatter the total input, i.e. ``count x
nranks`` elements, as nccl-tests prints it), and ``busbw = algbw x factor`` where the factor
makes the figure comparable to the hardware's link speed whatever the rank count:

==============  ==================
op              busbw factor
==============  ==================
all_reduce      2(n-1)/n
reduce_scatter  (n-1)/n
all_gather      (n-1)/n
all_to_all      (n-1)/n
broadcast       1
reduce          1
send_recv       1
==============  ==================

The functions accept numpy arrays for ``n`` so a sweep is one call.
"""

from __future__ import annotations

from willitscale.collectives.ops import Op

__all__ = ["algbw", "busbw", "busbw_factor", "nccl_tests_size"]


def busbw_factor(op: Op, n):
    """The factor from algbw to busbw for ``op`` over ``n`` ranks (n >= 1; 0 when n == 1)."""
    op = Op(op)
    if op is Op.ALL_REDUCE:
        return 2 * (n - 1) / n
    if op in (Op.REDUCE_SCATTER, Op.ALL_GATHER, Op.ALL_TO_ALL):
        return (n - 1) / n
    return 1.0 + 0 * n  # broadcast, reduce, send_recv (keeps numpy shape)


def algbw(size_bytes, time_s):
    """Algorithm bandwidth in bytes/s: the operation's size over its time."""
    return size_bytes / time_s


def busbw(op: Op, size_bytes, time_s, n):
    """Bus bandwidth in bytes/s: ``algbw x busbw_factor(op, n)``."""
    return algbw(size_bytes, time_s) * busbw_factor(op, n)


def nccl_tests_size(op: Op, bytes_per_rank, n):
    """The size nccl-tests reports (and our cost functions take) for a per-rank buffer.

    ``bytes_per_rank`` is what one rank contributes or keeps: all_gather's input shard,
    reduce_scatter's output shard, the whole buffer for every other op. nccl-tests reports
    all_gather by its gathered output and reduce_scatter by its input, both ``n x`` the shard.
    """
    op = Op(op)
    if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        return bytes_per_rank * n
    return bytes_per_rank + 0 * n
