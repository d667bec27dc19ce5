"""Memory per GPU of every pipeline stage, by component, against HBM.

* **Training state** (weights, gradients, fp32 master weights, optimizer states): the stage's
  parameters on one tensor-parallel rank at the bytes per parameter of the plan's framework and
  ZeRO stage (:mod:`willitscale.memory.frameworks`), or of a ``--memory-convention``
  (:mod:`willitscale.memory.state`) sharded where that framework shards, over the shard group
  (the data-parallel group, or its members in one node for hybrid sharding).
* **Activations**: :func:`willitscale.memory.activations.activation_memory` for one micro-batch
  of ``s / cp`` tokens on one tensor-parallel rank, times the micro-batches the schedule keeps
  in flight on that stage (:func:`willitscale.step.pipeline.in_flight`: ``p`` on the first
  stage of 1F1B), plus the one layer rebuilt at a time by recomputation. The first stage adds
  the embedding's, the last the LM head's (its fp32 logits). Without a model shape they cannot
  be computed and the estimate says so rather than inventing a number.
* **Buffers, workspace, optimizer-step temporaries**: :mod:`willitscale.memory.buffers`.
* **Outside PyTorch's tensors**: the CUDA context and NCCL's buffers
  (:mod:`willitscale.memory.device`).

PyTorch's peak (what ``torch.cuda.max_memory_allocated`` reads) is the state plus the larger of
the forward/backward transients (activations, buffers, workspace) and the optimizer step's
temporaries; what the GPU must hold is that plus the context and NCCL; what nvidia-smi shows
adds the allocator's cache (:func:`~willitscale.memory.device.reserved_ratio`). The GPU that
runs out first decides: the fullest stage column.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.memory.activations import activation_bytes, activation_memory
from willitscale.memory.buffers import DeepSpeedOptions, framework_buffers
from willitscale.memory.device import reserved_ratio, verdict_codes
from willitscale.memory.frameworks import StateBytes
from willitscale.workload.flops import RECOMPUTE
from willitscale.workload.recompute import layer_share
from willitscale.workload.stages import layer_kinds, stage_dense_layers

__all__ = ["DEFAULT_MEMORY_FRACTION", "MemorySettings", "StageMemory", "default_convention",
           "stage_memory"]

#: share of HBM a plan may fill. The CUDA context, NCCL's buffers and the allocator's margin are
#: counted (memory.device), so the whole GPU is available by default; ``--memory-fraction``
#: keeps a reserve of one's own. ``estimate`` and ``plan`` judge by the same rule.
DEFAULT_MEMORY_FRACTION = 1.0


def default_convention(grad_reduce_dtype: str) -> str:
    """The training-state convention matching the gradient dtype (``--memory-convention``'s
    names; the frameworks' own bytes are the default now, see memory.frameworks)."""
    return "handbook-18" if grad_reduce_dtype == "fp32" else "zero-16"


@dataclass(frozen=True, slots=True, kw_only=True)
class MemorySettings:
    """What the memory model needs beyond the plan: the state table, framework options and what
    lives outside PyTorch's tensors."""

    table: StateBytes  #: bytes per parameter by framework and ZeRO stage
    dtype: str
    grad_bytes: float
    gradient_as_bucket_view: bool = False
    deepspeed: DeepSpeedOptions = DeepSpeedOptions()
    foreach_adamw: bool = False
    distribute_saved: bool = False
    cuda_context: float = 0.0  #: bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class StageMemory:
    """Bytes per GPU of each stage column, arrays ``(plans, 3)`` (``other``: ``(plans,)``)."""

    weights: np.ndarray
    gradients: np.ndarray
    master: np.ndarray  #: fp32 master weights
    optimizer: np.ndarray  #: optimizer states (Adam's moments)
    activations: np.ndarray  #: zeros when unknown (``known`` False)
    buffers: np.ndarray  #: communication buffers
    workspace: np.ndarray
    step: np.ndarray  #: optimizer-step temporaries (the activations are gone by then)
    context: np.ndarray  #: CUDA context, per plan
    nccl: np.ndarray  #: NCCL's buffers, per plan
    known: bool  #: activations could be computed (a model shape was given)
    #: the allocator's reserved peak over the allocated peak, per plan (memory.device)
    reserve: np.ndarray

    @property
    def state(self) -> np.ndarray:
        return self.weights + self.gradients + self.master + self.optimizer

    @property
    def allocated(self) -> np.ndarray:
        """PyTorch's peak (``torch.cuda.max_memory_allocated``)."""
        return self.state + np.maximum(self.activations + self.buffers + self.workspace, self.step)

    @property
    def other(self) -> np.ndarray:
        """Outside PyTorch's allocator: CUDA context and NCCL, per plan."""
        return self.context + self.nccl

    @property
    def total(self) -> np.ndarray:
        """What the GPU must hold: the allocated peak, the context and NCCL."""
        return self.allocated + self.other[:, None]

    def device(self, capacity: float) -> np.ndarray:
        """What nvidia-smi would show on a GPU of ``capacity`` bytes: the reserved peak (released
        under pressure, so at most what the GPU leaves it), the context and NCCL."""
        other = self.other[:, None]
        reserved = np.minimum(self.reserve[:, None] * self.allocated,
                              np.maximum(capacity - other, self.allocated))
        return reserved + other

    def verdicts(self, limit) -> np.ndarray:
        """0 fits, 1 tight, 2 does not fit, per plan and column."""
        return verdict_codes(self.allocated, self.other[:, None], limit, self.reserve[:, None])


def _state(table: StateBytes, framework, zero, dense, expert, shard_dense, shard_expert):
    """(weights, gradients, master, optimizer) bytes per column."""
    out = []
    for part in (table.weights, table.gradients, table.master, table.optimizer):
        rep, sh = part[framework, zero, 0][:, None], part[framework, zero, 1][:, None]
        out.append(dense * (rep + sh / shard_dense[:, None]) + expert * (rep + sh / shard_expert[:, None]))
    return out


def stage_memory(*, scenario, batch, settings: MemorySettings, params_dense, params_expert,
                 shard_dense, shard_expert, layers, emb, head, in_flight, layer_params,
                 linear_params, nccl) -> StageMemory:
    """Memory per stage column for a batch of plans (see the module docstring)."""

    fw, zero = batch.framework, batch.zero
    weights, gradients, master, optimizer = _state(settings.table, fw, zero, params_dense,
                                                   params_expert, shard_dense, shard_expert)
    shape = np.shape(weights)
    pp = batch.pp.astype(float)
    tokens = batch.micro_batch * scenario.seq_len / batch.cp
    hidden = scenario.model.hidden if scenario.model is not None else 0
    element = activation_bytes(scenario.dtype)
    message = np.where(pp > 1, tokens * hidden * element / batch.tp, 0.0)
    extra = framework_buffers(
        framework=fw[:, None], zero=zero[:, None], dtype=settings.dtype,
        grad_bytes=settings.grad_bytes, stage_params=params_dense + params_expert,
        layer_params=layer_params, linear_params=linear_params,
        shard=shard_dense[:, None], pipeline_message=message[:, None] + np.zeros(shape),
        gradient_as_bucket_view=settings.gradient_as_bucket_view, deepspeed=settings.deepspeed,
        foreach_adamw=settings.foreach_adamw,
        reduce_after_backward=(pp > 1)[:, None] & (np.arange(3) < 2)[None, :])
    common = dict(weights=weights, gradients=gradients, master=master, optimizer=optimizer,
                  buffers=extra.communication, workspace=extra.workspace, step=extra.step,
                  context=np.full(len(batch), settings.cuda_context), nccl=np.asarray(nccl, dtype=float),
                  reserve=reserved_ratio(fw, zero) + np.zeros(len(batch)))
    if scenario.model is None:
        return StageMemory(activations=np.zeros(shape), known=False, **common)

    modes = np.asarray(RECOMPUTE, dtype=object)[batch.recompute]
    acts = lambda m: activation_memory(  # noqa: E731
        m, scenario.seq_len / batch.cp, batch.micro_batch, recompute=modes, tp=batch.tp,
        sequence_parallel=batch.sequence_parallel, flash_attention=scenario.options.flash_attention,
        dtype_bytes=element, distribute_saved=settings.distribute_saved)
    act = acts(scenario.model)
    col = lambda x: np.broadcast_to(np.asarray(x, dtype=float), batch.dp.shape)[:, None]  # noqa: E731
    # layers:N / every:K recompute a share of the stage's layers; the others keep everything
    share = layer_share(layers, batch.recompute_layers[:, None], batch.recompute_every[:, None])
    kept_per = lambda a: share * col(a.per_layer) + (1.0 - share) * col(a.layer_no_recompute)  # noqa: E731
    kinds = layer_kinds(scenario.model)
    if kinds is None:
        layer_bytes, transient = layers * kept_per(act), act.recompute_transient
    else:  # dense-first MoE: each stage's dense and MoE layers as what they are
        dense = stage_dense_layers(scenario.model.dense_layers, scenario.model.layers, layers)
        a_dense, a_moe = acts(kinds[0]), acts(kinds[1])
        layer_bytes = dense * kept_per(a_dense) + (layers - dense) * kept_per(a_moe)
        transient = np.maximum(a_dense.recompute_transient, a_moe.recompute_transient)
    kept = layer_bytes + emb * col(act.embedding) + head * col(act.head)
    activations = in_flight * kept + np.where(share > 0, col(transient), 0.0)
    return StageMemory(activations=activations, known=True, **common)
