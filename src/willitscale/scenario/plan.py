"""The parallel plan: how a training step is split over the cluster's GPUs.

A :class:`Plan` carries every degree from the start (data, tensor, pipeline, context and expert
parallelism, the ZeRO stage, micro-batch, gradient accumulation, recomputation, pipeline
schedule, sharding scope). Whether a model can be split that way is checked against the model
and the cluster by :mod:`willitscale.scenario.validate`.

The batch arithmetic, for ``dp`` data-parallel replicas::

    global_batch = micro_batch x grad_accum x dp        (samples per optimizer step)

``--global-batch`` fixes the global batch (strong scaling: more GPUs, fewer samples each);
``--micro-batch`` with ``--grad-accum`` fixes the work per GPU (weak scaling).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from willitscale.errors import ConfigError
from willitscale.memory.frameworks import (
    FRAMEWORKS,
    check_framework_stage,
    framework_index,
    implied_framework,
)
from willitscale.workload.recompute import BASE_MODES, parse_recompute

__all__ = [
    "RECOMPUTE",
    "PP_SCHEDULES",
    "ZERO_STAGES",
    "SHARD_SCOPES",
    "Plan",
    "BatchNotDivisible",
    "resolve_batch",
]

#: the base recomputation modes (none, selective = the attention core, Korthikanti et al. 2022,
#: full = every layer's forward again); Plan.recompute also takes modules:..., layers:N,
#: every:K (willitscale.workload.recompute)
RECOMPUTE = BASE_MODES
#: pipeline schedules (model parallelism): GPipe, 1F1B (PipeDream-Flush), interleaved 1F1B.
PP_SCHEDULES = ("gpipe", "1f1b", "interleaved")
ZERO_STAGES = (0, 1, 2, 3)
#: what ZeRO shards over: the whole data-parallel group (FSDP FULL_SHARD, DeepSpeed ZeRO) or the
#: data-parallel ranks of one node, replicated across nodes (FSDP HYBRID_SHARD)
SHARD_SCOPES = ("dp", "node")

_DEGREES = ("dp", "tp", "pp", "cp", "ep")


def positive_int(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(name, value, "an integer >= 1")


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """How one optimizer step is split over GPUs: parallel degrees and batch slicing."""

    dp: int = 1  #: data-parallel replicas
    tp: int = 1  #: tensor-parallel degree (Megatron)
    pp: int = 1  #: pipeline stages
    cp: int = 1  #: context-parallel degree (ring attention)
    ep: int = 1  #: expert-parallel degree (MoE)
    zero: int = 0  #: ZeRO stage: 0 = plain DDP, 1 optimizer, 2 + gradients, 3 + parameters
    micro_batch: int = 1  #: samples per GPU per forward/backward
    grad_accum: int = 1  #: micro-steps per optimizer step (gradients synced on the last only)
    recompute: str = "none"  #: a mode of willitscale.workload.recompute (canonical name kept)
    pp_schedule: str = "1f1b"
    virtual_stages: int = 1  #: model chunks per pipeline stage (interleaved schedule)
    sequence_parallel: bool = False
    shard_scope: str = "dp"  #: ZeRO shards over the whole data-parallel group, or within a node
    #: megatron, fsdp, deepspeed or ddp (memory.frameworks); "" = what the plan implies
    framework: str = ""

    def __post_init__(self) -> None:
        for name in (*_DEGREES, "micro_batch", "grad_accum", "virtual_stages"):
            positive_int(name, getattr(self, name))
        if self.zero not in ZERO_STAGES:
            raise ConfigError("zero", self.zero, "one of 0, 1, 2, 3")
        object.__setattr__(self, "recompute", parse_recompute(self.recompute).name)
        if self.pp_schedule not in PP_SCHEDULES:
            raise ConfigError("pp_schedule", self.pp_schedule, "one of " + ", ".join(PP_SCHEDULES))
        if self.virtual_stages > 1 and self.pp_schedule != "interleaved":
            raise ConfigError("virtual_stages", self.virtual_stages,
                              "1 unless pp_schedule = 'interleaved'")
        if self.pp_schedule == "interleaved" and self.virtual_stages < 2:
            raise ConfigError("virtual_stages", self.virtual_stages,
                              ">= 2 with the interleaved schedule (model chunks per stage)")
        if self.sequence_parallel and self.tp == 1:
            raise ConfigError("sequence_parallel", True, "tp > 1 (it splits the tensor-parallel "
                              "activations along the sequence)")
        if self.shard_scope not in SHARD_SCOPES:
            raise ConfigError("shard_scope", self.shard_scope, "dp (full shard) or node (hybrid)")
        if self.shard_scope == "node" and self.zero == 0:
            raise ConfigError("hybrid sharding (shard_scope = node) needs a ZeRO stage >= 1")
        if self.framework:
            framework_index(self.framework)
            check_framework_stage(self.framework, self.zero)

    @property
    def resolved_framework(self) -> str:
        """The framework given, or the one the plan implies (memory.frameworks)."""
        if self.framework:
            return self.framework
        mp = self.tp > 1 or self.pp > 1 or self.cp > 1 or self.ep > 1
        return FRAMEWORKS[int(implied_framework(self.zero, mp))]

    @property
    def gpus(self) -> int:
        """GPUs the plan occupies: ``dp x tp x pp x cp`` (experts are sharded inside dp x cp)."""
        return self.dp * self.tp * self.pp * self.cp

    @property
    def global_batch(self) -> int:
        """Samples per optimizer step: ``micro_batch x grad_accum x dp``."""
        return self.micro_batch * self.grad_accum * self.dp

    @property
    def micro_batches(self) -> int:
        """Micro-batches each pipeline runs per step (= ``grad_accum``)."""
        return self.grad_accum

    @property
    def is_data_parallel(self) -> bool:
        """Plain data parallelism: no tensor, pipeline, context or expert parallelism, no ZeRO."""
        return self.tp == self.pp == self.cp == self.ep == 1 and self.zero == 0

    @property
    def model_parallel(self) -> int:
        """GPUs that hold one replica of the model: ``tp x pp x cp``."""
        return self.tp * self.pp * self.cp

    def check_cluster(self, gpus: int) -> None:
        """Raise unless the plan uses exactly ``gpus`` GPUs, with the numbers in the message."""
        if self.gpus != gpus:
            raise ConfigError(
                f"tp*pp*dp*cp = {self.tp}*{self.pp}*{self.dp}*{self.cp} = {self.gpus} "
                f"but the cluster has {gpus} GPUs"
            )
        if self.dp % self.ep:
            raise ConfigError("ep", self.ep, f"a divisor of dp = {self.dp} (experts are sharded "
                              "over data-parallel ranks)")

    def with_dp(self, dp: int) -> Plan:
        """The same plan with another data-parallel degree (a scaling sweep's step)."""
        return replace(self, dp=dp)


def resolve_batch(*, dp: int, micro_batch: int | None, global_batch: int | None,
                  grad_accum: int | None) -> tuple[int, int]:
    """``(micro_batch, grad_accum)`` from whichever of the three batch knobs were given.

    * micro-batch (+ grad-accum, default 1): weak scaling, the global batch grows with ``dp``;
    * global batch (+ micro-batch, default 1): strong scaling, grad-accum is derived;
    * global batch + grad-accum: the micro-batch is derived.

    Values that disagree are an error that shows the arithmetic.
    """
    for name, value in (("micro_batch", micro_batch), ("global_batch", global_batch),
                        ("grad_accum", grad_accum)):
        if value is not None:
            positive_int(name, value)
    positive_int("dp", dp)
    if global_batch is None:
        return micro_batch or 1, grad_accum or 1
    if micro_batch is not None and grad_accum is not None:
        implied = micro_batch * grad_accum * dp
        if implied != global_batch:
            raise ConfigError(
                f"global_batch = {global_batch} disagrees with micro_batch x grad_accum x dp = "
                f"{micro_batch} x {grad_accum} x {dp} = {implied}; give two of the three"
            )
        return micro_batch, grad_accum
    if grad_accum is not None:
        per_replica = _divide(global_batch, dp * grad_accum, f"grad_accum x dp = {grad_accum} x {dp}")
        return per_replica, grad_accum
    micro = micro_batch or 1
    accum = _divide(global_batch, micro * dp, f"micro_batch x dp = {micro} x {dp}")
    return micro, accum


class BatchNotDivisible(ConfigError):
    """The global batch cannot be split evenly over the data-parallel replicas and micro-batches."""


def _divide(global_batch: int, divisor: int, what: str) -> int:
    if global_batch % divisor or global_batch < divisor:
        raise BatchNotDivisible(
            f"global_batch = {global_batch} is not a multiple of {what} = {divisor}: "
            f"each of the {divisor} slots must get a whole number of samples "
            f"(nearest valid: {max(divisor, global_batch // divisor * divisor)})"
        )
    return global_batch // divisor
