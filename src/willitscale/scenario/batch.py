"""Many plans as numpy arrays: the planner's unit of work.

A :class:`PlanBatch` holds one array per plan field (degrees, ZeRO stage, micro-batch, gradient
accumulation, recomputation, schedule, virtual stages, sequence parallelism, sharding scope).
The engine (:mod:`willitscale.step.engine`) evaluates all of them with the same array formulas; a single
:class:`~willitscale.scenario.plan.Plan` is a batch of one (:meth:`PlanBatch.from_plans`).
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from willitscale.memory.frameworks import FRAMEWORKS, implied_framework
from willitscale.scenario.plan import PP_SCHEDULES, Plan
from willitscale.workload.recompute import RERUN_SETS, RecomputeMode, parse_recompute

__all__ = ["PlanBatch"]

_INT_FIELDS = ("dp", "tp", "pp", "cp", "ep", "zero", "micro_batch", "grad_accum",
               "virtual_stages")


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanBatch:
    """Plans as parallel arrays (all of the same length)."""

    dp: np.ndarray
    tp: np.ndarray
    pp: np.ndarray
    cp: np.ndarray
    ep: np.ndarray
    zero: np.ndarray
    micro_batch: np.ndarray
    grad_accum: np.ndarray
    virtual_stages: np.ndarray
    recompute: np.ndarray  #: index into workload.recompute.RERUN_SETS (0 none, 1 selective, 2 full, ...)
    schedule: np.ndarray  #: index into PP_SCHEDULES (0 gpipe, 1 1f1b, 2 interleaved)
    sequence_parallel: np.ndarray  #: bool
    shard_node: np.ndarray  #: bool: ZeRO shards within a node (hybrid)
    framework: np.ndarray  #: index into FRAMEWORKS (megatron, fsdp, deepspeed, ddp)
    recompute_layers: np.ndarray  #: recompute this many layers per stage (0: all)
    recompute_every: np.ndarray  #: recompute every K-th layer (1: all)

    def __len__(self) -> int:
        return int(self.dp.shape[0])

    @classmethod
    def from_plans(cls, plans) -> PlanBatch:
        plans = list(plans)
        data = {k: np.array([getattr(p, k) for p in plans], dtype=np.int64) for k in _INT_FIELDS}
        modes = [parse_recompute(p.recompute) for p in plans]
        data["recompute"] = np.array([RERUN_SETS.index(m.rerun) for m in modes], dtype=np.int64)
        data["recompute_layers"] = np.array([m.layers for m in modes], dtype=np.int64)
        data["recompute_every"] = np.array([m.every for m in modes], dtype=np.int64)
        data["schedule"] = np.array([PP_SCHEDULES.index(p.pp_schedule) for p in plans], dtype=np.int64)
        data["sequence_parallel"] = np.array([p.sequence_parallel for p in plans], dtype=bool)
        data["shard_node"] = np.array([p.shard_scope == "node" for p in plans], dtype=bool)
        data["framework"] = np.array([FRAMEWORKS.index(p.resolved_framework) for p in plans],
                                     dtype=np.int64)
        return cls(**data)

    @classmethod
    def from_arrays(cls, **arrays) -> PlanBatch:
        """From arrays (or scalars broadcast against them); missing fields take Plan's defaults
        (the framework: what each plan implies)."""
        defaults = {"dp": 1, "tp": 1, "pp": 1, "cp": 1, "ep": 1, "zero": 0, "micro_batch": 1,
                    "grad_accum": 1, "virtual_stages": 1, "recompute": 0, "schedule": 1,
                    "sequence_parallel": False, "shard_node": False, "recompute_layers": 0,
                    "recompute_every": 1}
        values = {k: arrays.get(k, defaults[k]) for k in defaults}
        shaped = np.broadcast_arrays(*(np.asarray(v) for v in values.values()))
        out = {}
        for (k, _), arr in zip(values.items(), shaped):
            dtype = bool if k in ("sequence_parallel", "shard_node") else np.int64
            out[k] = np.ascontiguousarray(arr, dtype=dtype).reshape(-1)
        given = arrays.get("framework")
        if given is None:
            mp = (out["tp"] > 1) | (out["pp"] > 1) | (out["cp"] > 1) | (out["ep"] > 1)
            out["framework"] = implied_framework(out["zero"], mp)
        else:
            out["framework"] = np.ascontiguousarray(np.broadcast_to(given, out["dp"].shape),
                                                    dtype=np.int64)
        return cls(**out)

    def take(self, index) -> PlanBatch:
        """The plans at ``index`` (an index array or a boolean mask)."""
        return PlanBatch(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def plan(self, i: int) -> Plan:
        """Plan ``i`` as a :class:`Plan`."""
        return Plan(**{k: int(getattr(self, k)[i]) for k in _INT_FIELDS},
                    recompute=RecomputeMode(rerun=RERUN_SETS[int(self.recompute[i])],
                                            layers=int(self.recompute_layers[i]),
                                            every=int(self.recompute_every[i])).name,
                    pp_schedule=PP_SCHEDULES[int(self.schedule[i])],
                    sequence_parallel=bool(self.sequence_parallel[i]),
                    shard_scope="node" if self.shard_node[i] else "dp",
                    framework=FRAMEWORKS[int(self.framework[i])])

    @property
    def interleaved(self) -> np.ndarray:
        return self.schedule == PP_SCHEDULES.index("interleaved")

    @property
    def gpipe(self) -> np.ndarray:
        return self.schedule == PP_SCHEDULES.index("gpipe")

    @property
    def gpus(self) -> np.ndarray:
        return self.dp * self.tp * self.pp * self.cp

    @property
    def global_batch(self) -> np.ndarray:
        return self.micro_batch * self.grad_accum * self.dp

    def degrees(self) -> dict:
        return {"tp": self.tp, "pp": self.pp, "cp": self.cp, "ep": self.ep, "dp": self.dp,
                "grad_accum": self.grad_accum, "interleaved": self.interleaved,
                "virtual_stages": self.virtual_stages, "sequence_parallel": self.sequence_parallel}
