"""The ``[[collective]]`` section of a measured profile: one collective's measured cost per
(library, op, algorithm, protocol) on one communicator geometry.

NCCL's own tuning model costs every (algorithm, protocol) pair as ``time = latency + size /
bandwidth`` (src/graph/tuning.cc of NCCL v2.30.7-1, ``ncclTopoGetAlgoTime``; docs/collectives.md
section 11). A :class:`CollectiveCurve` holds that pair of numbers as a ``bench collectives`` sweep
measured them, fitted by ``willitscale calibrate`` (:mod:`willitscale.calibrate.collective_curves`),
so a calibrated profile replaces the model's figures for the pairs it measured::

    [[collective]]
    backend = "nccl"            # or "gloo"
    op = "all_reduce"
    algorithm = "Ring"          # NCCL's names (NCCL_ALGO), or Gloo's ("ring")
    protocol = "Simple"         # NCCL's (NCCL_PROTO); "" for Gloo
    nodes = 2
    ranks_per_node = 8
    latency_us = 41.5           # time of a message of no bytes
    algbw_GBps = 180.0          # bytes of the nccl-tests size per second, GB = 1e9
    min_size_bytes = 1048576    # the sizes the fit covered
    max_size_bytes = 1073741824
    points = 22
    rms_error = 0.04
    runs = [3]
    source = "willitscale calibrate ..."

**Point-to-point entries** (NCCL send_recv and all_to_all). NCCL runs them as point-to-point
sends, not as a tuned collective: ``NCCL_ALGO`` and ``NCCL_PROTO`` are read only by the
collective tuner (src/graph/tuning.cc 453-462 of v2.30.7-1, for the five functions of
``NCCL_NUM_FUNCTIONS``, src/include/nccl_common.h 72, "Send/Recv not included"); ``ncclAlltoAll``
is enqueued as one send and one receive per peer (src/enqueue.cc 3070-3079), nccl-tests'
``sendrecv_perf`` calls ``ncclSend``/``ncclRecv`` (src/sendrecv.cu 58-59 of nccl-tests a0b82b2).
Each send picks its protocol by itself: LL when its bytes are at most ``nChannels x
NCCL_P2P_LL_THRESHOLD`` (16384 by default), Simple above (src/enqueue.cc 859, 932-933). Such an
entry is written ``algorithm = "P2P"``, ``protocol = "LL/Simple"``: the line fitted over the
sizes NCCL ran with its own per-message protocol choice, whatever ``NCCL_ALGO``/``NCCL_PROTO``
said. It times the model's one point-to-point candidate (``P2P/Simple``,
:mod:`willitscale.collectives.nccl.model`).

Registered in :data:`willitscale.hardware.profile.SECTIONS` as ``collective``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from willitscale.config import Table
from willitscale.errors import ConfigError

__all__ = ["CollectiveCurve", "BACKENDS", "P2P_ALGORITHM", "P2P_PROTOCOL", "P2P_OPS"]

BACKENDS = ("nccl", "gloo")
NCCL_PROTOCOLS = ("LL", "LL128", "Simple")
#: the algorithm and protocol labels of NCCL's point-to-point entries (module docstring)
P2P_ALGORITHM, P2P_PROTOCOL = "P2P", "LL/Simple"
#: the ops NCCL runs as point-to-point sends
P2P_OPS = ("send_recv", "all_to_all")
GB = 1e9
US = 1e-6


def _q(text: str) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveCurve:
    """``time(size) = latency + size / bandwidth`` of one (library, op, algorithm, protocol) on
    ``nodes`` x ``ranks_per_node`` ranks, fitted to sizes ``min_size``..``max_size``."""

    backend: str
    op: str
    algorithm: str
    protocol: str = ""
    nodes: int
    ranks_per_node: int
    latency: float  #: seconds
    bandwidth: float  #: algorithm bandwidth, bytes of the nccl-tests size per second
    min_size: float = 0.0
    max_size: float = math.inf
    points: int = 0
    rms_error: float = 0.0
    runs: tuple[int, ...] = ()
    source: str = ""

    def __post_init__(self) -> None:
        owner = f"collective {self.backend} {self.op} {self.algorithm}/{self.protocol or '-'}"
        if self.backend not in BACKENDS:
            raise ConfigError(f"{owner}: backend", self.backend, " or ".join(BACKENDS))
        if self.backend == "nccl":
            self._check_nccl_pair(owner)
        if not self.op or not self.algorithm:
            raise ConfigError(f"{owner}: op/algorithm", (self.op, self.algorithm), "non-empty names")
        for name in ("nodes", "ranks_per_node"):
            if int(getattr(self, name)) < 1:
                raise ConfigError(f"{owner}: {name}", getattr(self, name), "an integer >= 1")
        if not (math.isfinite(self.latency) and self.latency >= 0):
            raise ConfigError(f"{owner}: latency_us", self.latency / US, "a number >= 0")
        if not (math.isfinite(self.bandwidth) and self.bandwidth > 0):
            raise ConfigError(f"{owner}: algbw_GBps", self.bandwidth / GB, "a number > 0")
        if not (0 <= self.min_size <= self.max_size):
            raise ConfigError(f"{owner}: min_size_bytes/max_size_bytes", (self.min_size, self.max_size),
                              "0 <= min_size_bytes <= max_size_bytes")
        object.__setattr__(self, "runs", tuple(int(r) for r in self.runs))

    def _check_nccl_pair(self, owner: str) -> None:
        """NCCL's collectives take one of its protocols; its point-to-point ops the P2P labels."""
        p2p = self.op in P2P_OPS
        if p2p or self.algorithm.lower() == P2P_ALGORITHM.lower():
            if not p2p:
                raise ConfigError(f"{owner}: algorithm", self.algorithm,
                                  f"one of NCCL's collective algorithms ({P2P_ALGORITHM} is for "
                                  f"{' and '.join(P2P_OPS)} only)")
            if (self.algorithm.lower(), self.protocol.lower()) != (P2P_ALGORITHM.lower(), P2P_PROTOCOL.lower()):
                raise ConfigError(f"{owner}: algorithm/protocol", (self.algorithm, self.protocol),
                                  f"{P2P_ALGORITHM!r} and {P2P_PROTOCOL!r}: NCCL runs {self.op} as "
                                  "point-to-point sends, choosing LL or Simple per message")
            object.__setattr__(self, "algorithm", P2P_ALGORITHM)  # one spelling
            object.__setattr__(self, "protocol", P2P_PROTOCOL)
        elif self.protocol not in NCCL_PROTOCOLS:
            raise ConfigError(f"{owner}: protocol", self.protocol, "one of NCCL's " + ", ".join(NCCL_PROTOCOLS))

    @property
    def point_to_point(self) -> bool:
        """An NCCL point-to-point entry (send_recv, all_to_all: ``P2P``, ``LL/Simple``)."""
        return self.backend == "nccl" and self.algorithm == P2P_ALGORITHM

    @property
    def model_pair(self) -> tuple[str, str]:
        """(algorithm, protocol) of the NCCL model's candidate this entry times: its own pair, or
        the model's one point-to-point candidate ``P2P/Simple``."""
        if self.point_to_point:
            return P2P_ALGORITHM, "Simple"
        return self.algorithm, self.protocol

    @property
    def key(self) -> tuple:
        return (self.backend, self.op, self.algorithm.lower(), self.protocol.lower(), self.nodes,
                self.ranks_per_node)

    @property
    def ranks(self) -> int:
        return self.nodes * self.ranks_per_node

    @property
    def pair(self) -> str:
        """"Ring/Simple", "P2P (LL/Simple)", Gloo's "ring"."""
        if self.point_to_point:
            return f"{self.algorithm} ({self.protocol})"
        return f"{self.algorithm}/{self.protocol}" if self.protocol else self.algorithm

    def time(self, size):
        """Seconds for ``size`` bytes (nccl-tests' size convention; numpy arrays broadcast)."""
        return self.latency + size / self.bandwidth

    def covers(self, size: float) -> bool:
        """Whether ``size`` lies within the sizes the fit saw."""
        return self.min_size <= size <= self.max_size

    @classmethod
    def from_table(cls, t: Table) -> CollectiveCurve:
        out = cls(backend=t.str("backend", choices=iter(BACKENDS)), op=t.str("op"),
                  algorithm=t.str("algorithm"), protocol=t.str("protocol", ""),
                  nodes=t.int("nodes", min=1), ranks_per_node=t.int("ranks_per_node", min=1),
                  latency=t.float("latency_us", min=0) * US,
                  bandwidth=t.float("algbw_GBps", positive=True) * GB,
                  min_size=t.float("min_size_bytes", 0.0, min=0),
                  max_size=t.float("max_size_bytes", math.inf, min=0),
                  points=t.int("points", 0, min=0), rms_error=t.float("rms_error", 0.0, min=0),
                  runs=tuple(int(r) for r in t.list("runs", [])), source=t.str("source", ""))
        t.done()
        return out

    def toml_lines(self) -> list[str]:
        lines = ["[[collective]]", f"backend = {_q(self.backend)}", f"op = {_q(self.op)}",
                 f"algorithm = {_q(self.algorithm)}", f"protocol = {_q(self.protocol)}",
                 f"nodes = {self.nodes}", f"ranks_per_node = {self.ranks_per_node}",
                 f"latency_us = {float(self.latency / US)!r}", f"algbw_GBps = {float(self.bandwidth / GB)!r}",
                 f"min_size_bytes = {int(self.min_size)}"]
        if math.isfinite(self.max_size):
            lines.append(f"max_size_bytes = {int(self.max_size)}")
        if self.points:
            lines += [f"points = {self.points}", f"rms_error = {float(self.rms_error)!r}"]
        if self.runs:
            lines.append("runs = [" + ", ".join(str(r) for r in self.runs) + "]")
        if self.source:
            lines.append(f"source = {_q(self.source)}")
        return lines
