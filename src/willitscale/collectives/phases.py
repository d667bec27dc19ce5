"""Traffic as data: phases of concurrent flows, streams of phases, and the traffic of a run.

* A :class:`Phase` is a set of flows that start together (GPU ``src[i]`` sends ``size[i]`` bytes
  to GPU ``dst[i]``), repeated ``repeat`` times back to back: a ring all-reduce over n ranks is
  one phase of n flows of ``S/n`` bytes repeated ``2(n-1)`` times. A phase (one repetition) ends
  when its last byte arrives: the last flow's transfer end plus ``latency_hops`` times its path
  latency (1 for one transfer; a pipelined chain or tree pays its depth), plus ``extra_latency``.
* A :class:`Stream` runs its phases in order, one after the other (bulk-synchronous steps, as
  NCCL's algorithms step). Different streams run concurrently and share links: several jobs,
  or the TP, PP and DP traffic of one training step.
* :class:`Traffic` is the streams of one simulation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from willitscale.errors import ConfigError

__all__ = ["Phase", "Stream", "Traffic"]


def _ro(a, dtype) -> np.ndarray:
    a = np.array(a, dtype=dtype, copy=True).reshape(-1)
    a.setflags(write=False)
    return a


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Phase:
    """Flows that start together; repeated ``repeat`` times. ``key`` tells apart flows between
    the same pair (NCCL channels) for ECMP hashing. Compared by identity."""

    src: np.ndarray
    dst: np.ndarray
    size: np.ndarray  #: bytes per flow
    key: np.ndarray | None = None
    repeat: int = 1
    latency_hops: int = 1  #: path latencies a flow pays: 1, or the depth of a pipelined chain/tree
    #: how a step's latency is charged: ``max`` - the slowest flow's path latency (independent
    #: transfers); ``mean`` - the mean over the flows (a ring: each step's data depends on the
    #: previous step's at the upstream rank, so the dependency chain walks the ring and pays each
    #: hop's latency in turn - NCCL's tuning model, 2(m-1) inter-node and 2(n-m) intra-node hops)
    latency_mode: str = "max"
    extra_latency: float = 0.0  #: seconds added after the last byte arrives
    label: str = ""

    def __post_init__(self) -> None:
        src, dst = _ro(self.src, np.int64), _ro(self.dst, np.int64)
        size = _ro(np.broadcast_to(np.asarray(self.size, dtype=np.float64), src.shape), np.float64)
        key = _ro(np.zeros(src.size) if self.key is None else np.broadcast_to(self.key, src.shape), np.int64)
        if not (src.size == dst.size == size.size):
            raise ConfigError(f"phase {self.label!r}: src, dst and size have different lengths "
                              f"({src.size}, {dst.size}, {size.size})")
        if np.any(src == dst):
            raise ConfigError(f"phase {self.label!r}: a flow from a GPU to itself")
        if np.any(~np.isfinite(size)) or np.any(size < 0):
            raise ConfigError(f"phase {self.label!r}: flow size", float(size.min()), "bytes >= 0")
        if int(self.repeat) != self.repeat or self.repeat < 1:
            raise ConfigError(f"phase {self.label!r}: repeat", self.repeat, "an integer >= 1")
        if int(self.latency_hops) != self.latency_hops or self.latency_hops < 1:
            raise ConfigError(f"phase {self.label!r}: latency_hops", self.latency_hops, "an integer >= 1")
        if self.latency_mode not in ("max", "mean"):
            raise ConfigError(f"phase {self.label!r}: latency_mode", self.latency_mode, "max or mean")
        if not self.extra_latency >= 0:
            raise ConfigError(f"phase {self.label!r}: extra_latency", self.extra_latency, "seconds >= 0")
        for name, value in (("src", src), ("dst", dst), ("size", size), ("key", key)):
            object.__setattr__(self, name, value)

    @property
    def flows(self) -> int:
        return int(self.src.size)

    @property
    def bytes(self) -> float:
        """Bytes moved by all repetitions."""
        return float(self.size.sum()) * self.repeat


@dataclass(frozen=True, slots=True, kw_only=True)
class Stream:
    """Phases run one after another, starting at ``start`` seconds."""

    name: str
    phases: tuple[Phase, ...]
    start: float = 0.0

    def __post_init__(self) -> None:
        object.__setattr__(self, "phases", tuple(self.phases))
        if not self.phases:
            raise ConfigError(f"stream {self.name!r}: no phases")
        if not self.start >= 0:
            raise ConfigError(f"stream {self.name!r}: start", self.start, "seconds >= 0")

    @property
    def steps(self) -> int:
        return sum(p.repeat for p in self.phases)

    @property
    def bytes(self) -> float:
        return sum(p.bytes for p in self.phases)


@dataclass(frozen=True, slots=True)
class Traffic:
    """The concurrent streams of one simulation."""

    streams: tuple[Stream, ...]

    def __init__(self, streams: Sequence[Stream]):
        object.__setattr__(self, "streams", tuple(streams))
        if not self.streams:
            raise ConfigError("traffic: no streams")
        names = [s.name for s in self.streams]
        if len(set(names)) != len(names):
            raise ConfigError("traffic: stream names must be unique, got " + ", ".join(names))

    def __repr__(self) -> str:
        streams = ", ".join(f"{s.name} ({len(s.phases)} phases, {s.steps} steps)" for s in self.streams[:4])
        more = f", +{len(self.streams) - 4} more" if len(self.streams) > 4 else ""
        total = sum(s.bytes for s in self.streams)
        return f"Traffic({len(self.streams)} streams, {total:.4g} bytes: {streams}{more})"

    def pair_bytes(self, gpus: int) -> tuple[np.ndarray, np.ndarray]:
        """(pair id ``src * gpus + dst``, bytes) over all phases and repetitions, pairs unique."""
        ids = [p.src * gpus + p.dst for s in self.streams for p in s.phases]
        vol = [p.size * p.repeat for s in self.streams for p in s.phases]
        if not ids:
            return np.zeros(0, np.int64), np.zeros(0)
        uniq, inv = np.unique(np.concatenate(ids), return_inverse=True)
        return uniq, np.bincount(inv, weights=np.concatenate(vol), minlength=uniq.size)

    def max_gpu(self) -> int:
        return max((int(max(p.src.max(), p.dst.max())) for s in self.streams for p in s.phases if p.flows),
                   default=-1)
