"""Memory of the training state (weights, gradients, master copy, optimizer states) per GPU.

A :class:`StateConvention` says how many bytes each parameter costs in each of the four parts;
ZeRO (Rajbhandari et al. 2020, "ZeRO: Memory Optimizations Toward Training Trillion Parameter
Models", section 5) shards them over the ``dp`` data-parallel ranks:

========  ==========================================  =====================================
stage     sharded over dp                             per GPU (zero-16: 2 + 2 + 12 bytes)
========  ==========================================  =====================================
0         nothing (plain DDP)                         16 P
1 (P_os)  master copy + optimizer states              4 P + 12 P / dp
2 (+g)    ... + gradients                             2 P + 14 P / dp
3 (+p)    ... + weights (FSDP full shard)             16 P / dp
========  ==========================================  =====================================

Transient buffers (a ZeRO-3 layer gathered for its forward, gradient buckets in flight,
allocator fragmentation) are not state and are not counted here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from willitscale.errors import ConfigError, UnknownNameError
from willitscale.workload.arrays import float_or_array

__all__ = [
    "WEIGHT_BYTES",
    "state_parts",
    "StateConvention",
    "StateMemory",
    "CONVENTIONS",
    "get_convention",
    "state_bytes_per_gpu",
    "state_memory",
]

ZERO_STAGES = (0, 1, 2, 3)

WEIGHT_BYTES = 2  #: bf16 weights: what ZeRO-1/2/3 and FSDP all-gather


@dataclass(frozen=True, slots=True, kw_only=True)
class StateConvention:
    """Bytes per parameter of each part of the training state, with where the figure comes from."""

    name: str
    weights: float  #: the copy forward and backward read (fp16/bf16 in mixed precision)
    gradients: float
    master: float  #: fp32 master weights kept by the optimizer (0 when the weights are fp32)
    optimizer: float  #: optimizer states (Adam: first and second moments)
    description: str
    source: str

    @property
    def bytes_per_param(self) -> float:
        """Total bytes per parameter, unsharded."""
        return self.weights + self.gradients + self.master + self.optimizer


CONVENTIONS: Mapping[str, StateConvention] = MappingProxyType({
    c.name: c
    for c in (
        StateConvention(
            name="zero-16", weights=2, gradients=2, master=4, optimizer=8,
            description="mixed-precision Adam: fp16 weights and gradients, fp32 master weights, "
                        "fp32 Adam moments (2 + 2 + 4 + 4 + 4)",
            source="Rajbhandari et al. 2020 (ZeRO), section 3.1: 2Ψ + 2Ψ + KΨ with K = 12; "
                   "'GPU fabrics for GenAI workloads' quotes it as 16 x 175B",
        ),
        StateConvention(
            name="handbook-18", weights=2, gradients=4, master=4, optimizer=8,
            description="mixed-precision AdamW with fp32 gradients: 6 bytes of weights (fp32 + "
                        "half copy), 4 of fp32 gradients, 8 of Adam moments; also Megatron-LM's "
                        "bf16 params + fp32 main grads (6 + 12/dp with its distributed optimizer)",
            source="Bekman, Machine Learning Engineering, 'Anatomy of Model's Memory' "
                   "(the handbook's networking chapter cites it as 18 bytes per parameter)",
        ),
        StateConvention(
            name="fp32-16", weights=4, gradients=4, master=0, optimizer=8,
            description="pure fp32 Adam: fp32 weights and gradients, fp32 moments, no master copy",
            source="4 + 4 + 4 + 4 bytes: fp32 is 4 bytes; Adam keeps two moments per parameter "
                   "(Kingma & Ba 2015)",
        ),
        StateConvention(
            name="fp16-no-master-12", weights=2, gradients=2, master=0, optimizer=8,
            description="fp16 weights and gradients, fp32 Adam moments, no fp32 master copy "
                        "(fairseq/metaseq --memory-efficient-fp16, as OPT-175B trained)",
            source="facebookresearch/metaseq metaseq/optim/fp16_optimizer.py @f7ffa5f "
                   "(MemoryEfficientFP16Optimizer: 'this version does not maintain an FP32 copy of "
                   "the model')",
        ),
        StateConvention(
            name="inference-2", weights=2, gradients=0, master=0, optimizer=0,
            description="weights only, fp16/bf16 (no training state): a lower bound",
            source="derived: 2 bytes per fp16/bf16 parameter",
        ),
    )
})


def get_convention(convention: str | StateConvention) -> StateConvention:
    """A :class:`StateConvention` by name (or itself); unknown names suggest the closest."""
    if isinstance(convention, StateConvention):
        return convention
    try:
        return CONVENTIONS[convention]
    except KeyError:
        raise UnknownNameError("memory convention", str(convention), CONVENTIONS) from None


def _divisors(zero_stage, dp):
    """(weights, gradients, optimizer) divisors for ZeRO ``zero_stage`` over ``dp`` ranks."""
    stage = np.asarray(zero_stage)
    ranks = np.asarray(dp, dtype=float)
    if not np.all(np.isin(stage, ZERO_STAGES)):
        raise ConfigError("zero_stage", zero_stage, "0, 1, 2 or 3")
    if np.any(ranks < 1):
        raise ConfigError("dp", dp, "an integer >= 1")
    return (np.where(stage >= 3, ranks, 1.0), np.where(stage >= 2, ranks, 1.0),
            np.where(stage >= 1, ranks, 1.0))


def state_bytes_per_gpu(params, convention: str | StateConvention = "zero-16", zero_stage=0, dp=1):
    """Bytes of training state one GPU holds for ``params`` parameters (numpy-friendly in all
    of ``params``, ``zero_stage`` and ``dp``).

    ``params`` is what this GPU's model replica holds (divide by tensor and pipeline degrees
    first); ZeRO ``zero_stage`` then shards parts of it over ``dp`` data-parallel ranks.
    """
    c = get_convention(convention)
    w_div, g_div, o_div = _divisors(zero_stage, dp)
    p = np.asarray(params, dtype=float)
    return float_or_array(p * (c.weights / w_div + c.gradients / g_div + (c.master + c.optimizer) / o_div))


@dataclass(frozen=True, slots=True, kw_only=True)
class StateMemory:
    """Training-state bytes on one GPU, by part (floats, or arrays for array inputs)."""

    convention: str
    zero_stage: object
    dp: object
    params: object
    weights: object
    gradients: object
    master: object
    optimizer: object
    total: object

    @property
    def bytes_per_param(self):
        """Effective bytes per parameter after sharding."""
        return float_or_array(np.asarray(self.total) / np.asarray(self.params, dtype=float))


def state_memory(params, convention: str | StateConvention = "zero-16", zero_stage=0, dp=1) -> StateMemory:
    """:func:`state_bytes_per_gpu` broken down into weights, gradients, master copy and optimizer."""
    c = get_convention(convention)
    w_div, g_div, o_div = _divisors(zero_stage, dp)
    p = np.asarray(params, dtype=float)
    parts = {
        "weights": p * c.weights / w_div,
        "gradients": p * c.gradients / g_div,
        "master": p * c.master / o_div,
        "optimizer": p * c.optimizer / o_div,
    }
    total = sum(parts.values())
    return StateMemory(convention=c.name, zero_stage=zero_stage, dp=dp, params=params,
                       total=float_or_array(total),
                       **{k: float_or_array(v) for k, v in parts.items()})


def state_parts(params_dense, params_expert, convention: str, zero, shard_dense, shard_expert):
    """``(weights, gradients, optimizer incl. master copy)`` bytes per GPU, arrays."""
    d = state_memory(params_dense, convention, zero_stage=zero, dp=shard_dense)
    e = state_memory(params_expert, convention, zero_stage=zero, dp=shard_expert)
    f = lambda x: np.asarray(x, dtype=float)  # noqa: E731
    return (f(d.weights) + f(e.weights), f(d.gradients) + f(e.gradients),
            f(d.master) + f(d.optimizer) + f(e.master) + f(e.optimizer))
