"""The traffic of one training step from a parallel layout, given as plain degrees and bytes.

Ranks are placed by the one rank layout the estimate uses (:mod:`willitscale.topology.placement`):
Megatron-LM's order by default, TP innermost, then CP, EP, DP, PP outermost, expert parallelism
carved out of data parallelism (``ep`` divides ``dp``; ``tp x cp x dp x pp`` ranks), and rank
``r`` runs on GPU ``first_gpu + r`` (GPUs numbered server by server). So a TP group of 8 fills one
8-GPU server, and the DP and PP groups of one TP rank sit on one rail. ``order`` changes the
nesting, e.g. ``("tp", "cp", "ep", "pp", "dp")`` keeps a whole model copy (TP x PP) on
neighbouring servers and spreads DP widest.

The step's communication, one stream each, all starting together so they contend as they would
when overlapped (the estimate's scheduler decides what really overlaps with compute):

* ``tp``: ``tp_count`` all-reduces of ``tp_bytes`` in every TP group;
* ``cp``: ``cp_count`` all-gathers of ``cp_bytes`` in every CP group;
* ``ep``: ``ep_count`` all-to-alls of ``ep_bytes`` per GPU in every EP group;
* ``pp``: ``pp_count`` point-to-point sends of ``pp_bytes`` per GPU from every stage to the
  next, all stage boundaries at once (with Megatron's scatter-gather each TP rank sends its
  ``1/TP`` share to the same TP rank of the next stage: rail-local). Forward sends only: the
  backward pass's activation gradients go from each stage to the previous one, on the other
  direction of the same duplex links, and are not generated;
* ``dp``: one all-reduce of ``dp_bytes`` (gradients per GPU) in every data-parallel gradient
  group (the ``cp x dp`` ranks that hold the same weights, as in the estimate).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.collectives.ops import Op
from willitscale.collectives.phases import Phase, Stream, Traffic
from willitscale.errors import ConfigError
from willitscale.fabric.traffic import CollectiveCall, call_phases
from willitscale.topology.graph import Topology
from willitscale.topology.placement import AXES, group_members

__all__ = ["DIMS", "ParallelLayout", "StepComm", "step_traffic"]

DIMS = AXES  # innermost first


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelLayout:
    """Parallel degrees and where rank 0 sits; ``dp`` counts every data-parallel replica, the
    ``ep`` expert-parallel ranks among them."""

    tp: int = 1
    cp: int = 1
    ep: int = 1
    dp: int = 1
    pp: int = 1
    first_gpu: int = 0
    order: tuple[str, ...] = DIMS  #: innermost first

    def __post_init__(self) -> None:
        if sorted(self.order) != sorted(DIMS):
            raise ConfigError("order", ",".join(self.order), "a permutation of " + ",".join(DIMS))
        for d in DIMS:
            v = getattr(self, d)
            if isinstance(v, bool) or int(v) != v or v < 1:
                raise ConfigError(d, v, "an integer >= 1")
        if self.dp % self.ep:
            raise ConfigError("ep", self.ep, f"a divisor of dp = {self.dp}: expert parallelism is "
                              "carved out of data parallelism (Megatron-LM), as in estimate")
        if self.first_gpu < 0:
            raise ConfigError("first_gpu", self.first_gpu, "an integer >= 0")

    @property
    def world(self) -> int:
        return self.tp * self.cp * self.dp * self.pp

    def groups(self, dim: str) -> np.ndarray:
        """(groups x degree) GPU indices of every group along ``dim`` (e.g. all DP groups; the DP
        groups are the data-parallel gradient groups, ``cp x dp`` ranks)."""
        if dim not in DIMS:
            raise ConfigError("dimension", dim, "one of " + ", ".join(DIMS))
        degrees = {d: getattr(self, d) for d in DIMS}
        return self.first_gpu + group_members(dim, degrees, self.order)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepComm:
    """Bytes and counts of each kind of communication in one step (per GPU, per operation)."""

    tp_bytes: float = 0.0
    tp_count: int = 0
    cp_bytes: float = 0.0
    cp_count: int = 0
    ep_bytes: float = 0.0
    ep_count: int = 0
    pp_bytes: float = 0.0
    pp_count: int = 0
    dp_bytes: float = 0.0

    def __post_init__(self) -> None:
        for name in ("tp_bytes", "cp_bytes", "ep_bytes", "pp_bytes", "dp_bytes"):
            if not getattr(self, name) >= 0:
                raise ConfigError(name, getattr(self, name), "bytes >= 0")
        for name in ("tp_count", "cp_count", "ep_count", "pp_count"):
            v = getattr(self, name)
            if int(v) != v or v < 0:
                raise ConfigError(name, v, "an integer >= 0")


def _pp_phase(layout: ParallelLayout, size: float, count: int) -> Phase:
    g = layout.groups("pp")  # (groups x stages)
    src = g[:, :-1].reshape(-1)
    dst = g[:, 1:].reshape(-1)
    return Phase(src=src, dst=dst, size=size, repeat=count, label="pp send")


def step_traffic(topology: Topology, layout: ParallelLayout, comm: StepComm, *, channels: int = 1,
                 algorithm: str | None = None) -> Traffic:
    """The streams of one step (see module docstring); kinds with no bytes are left out."""
    if layout.first_gpu + layout.world > topology.gpus:
        raise ConfigError(f"the layout needs {layout.world} GPUs from GPU {layout.first_gpu} but the "
                          f"{topology.kind} fabric has {topology.gpus}")
    streams = []
    spec = (("tp", Op.ALL_REDUCE, comm.tp_bytes, comm.tp_count, algorithm),
            ("cp", Op.ALL_GATHER, comm.cp_bytes, comm.cp_count, None),
            ("ep", Op.ALL_TO_ALL, comm.ep_bytes, comm.ep_count, None),
            ("dp", Op.ALL_REDUCE, comm.dp_bytes, 1, algorithm))
    for dim, op, size, count, alg in spec:
        if getattr(layout, dim) < 2 or size <= 0 or count < 1:
            continue
        call = CollectiveCall(op=op, size=size, groups=tuple(map(tuple, layout.groups(dim))),
                              algorithm=alg if op is Op.ALL_REDUCE else None, channels=channels,
                              count=count, name=dim)
        streams.append(Stream(name=dim, phases=tuple(call_phases(topology, call))))
    if layout.pp > 1 and comm.pp_bytes > 0 and comm.pp_count > 0:
        streams.append(Stream(name="pp", phases=(_pp_phase(layout, comm.pp_bytes, comm.pp_count),)))
    if not streams:
        raise ConfigError("step traffic: no communication (every degree is 1 or every size is 0)")
    return Traffic(streams)
