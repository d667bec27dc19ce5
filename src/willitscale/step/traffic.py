"""One kind of model-parallel communication, per micro-batch, per pipeline-stage column.

Every kind (tensor, context, expert parallelism, pipeline sends, ZeRO-3 gathers) is described by
a :class:`Traffic`: seconds the communication runs during the forward and the backward of one
micro-batch on a stage, how much of it compute does not hide (``*_exposed``: on the critical
path), the bytes one GPU sends and the collectives it issues. Arrays are ``(plans, 3)``: first,
middle and last stage (:mod:`willitscale.workload.stages`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Traffic", "zero_traffic"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Traffic:
    """Communication of one kind per micro-batch, per stage column (arrays ``(plans, 3)``)."""

    kind: str  #: tp, cp, ep, pp, zero3
    op: str  #: the collective (all_reduce, send_recv, all_to_all, ...)
    fwd: np.ndarray  #: seconds during the forward
    bwd: np.ndarray  #: seconds during the backward (recomputation included)
    fwd_exposed: np.ndarray  #: of which not hidden
    bwd_exposed: np.ndarray
    bytes: np.ndarray  #: bytes per GPU (nccl-tests message sizes, summed)
    calls: np.ndarray  #: collectives issued

    @property
    def time(self) -> np.ndarray:
        return self.fwd + self.bwd

    @property
    def exposed(self) -> np.ndarray:
        return self.fwd_exposed + self.bwd_exposed

    @property
    def hidden(self) -> np.ndarray:
        return self.time - self.exposed


def zero_traffic(kind: str, op: str, shape) -> Traffic:
    """No communication of this kind."""
    z = np.zeros(shape)
    return Traffic(kind=kind, op=op, fwd=z, bwd=z, fwd_exposed=z, bwd_exposed=z, bytes=z, calls=z)


def exposed_part(comm, compute, overlapped):
    """``comm`` on the critical path: all of it, or what exceeds ``compute`` when overlapped."""
    return np.where(overlapped, np.maximum(0.0, comm - compute), comm)
