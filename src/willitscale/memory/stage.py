"""Memory per GPU of every pipeline stage: training state, activations and buffers, against HBM.

* **Training state**: the stage's parameters on one tensor-parallel rank, in bytes per parameter
  of a named convention (:mod:`willitscale.memory.state`), with ZeRO sharding over the
  data-parallel group (or within a node, hybrid). The default convention follows the gradient
  dtype: fp32 gradients (PyTorch AMP, Megatron's fp32 main grads) ``handbook-18`` (the 18 bytes
  per parameter of Bekman's networking chapter); bf16/fp16 gradients ``zero-16`` (ZeRO's 16).
* **Activations**: :func:`willitscale.memory.activations.activation_memory` for one
  micro-batch of ``s / cp`` tokens on one tensor-parallel rank, times the micro-batches the
  schedule keeps in flight on that stage (:func:`willitscale.step.pipeline.in_flight`), plus
  the one layer rebuilt at a time by recomputation. The first stage adds the embedding's, the
  last the LM head's (its fp32 logits). Without a model shape they cannot be computed and the
  estimate says so rather than inventing a number.
* **Buffers**: with ZeRO-3 the gathered weights of the layer being computed and of the one
  prefetched (bf16; unknown without a model shape, like the activations, and left out); with pipelining the receive buffers of one forward and one backward
  message. A plain data-parallel plan is PyTorch DDP: by default
  (``gradient_as_bucket_view=False``) its buckets hold a copy of every gradient, counted here
  (the gradients' bytes once more); ``--gradient-as-bucket-view`` drops it. Model-parallel
  plans follow Megatron-LM, whose gradients live in its contiguous grad buffer (no copy), as do
  ZeRO's and FSDP's. CUDA context, NCCL workspaces and allocator fragmentation (typically 1-5
  GB) are not counted: plans must fit in :data:`DEFAULT_MEMORY_FRACTION` of HBM instead.
* **Activations** are 2 bytes per element in bf16, fp16 and fp8 training (Transformer Engine
  keeps FP8 only inside its GEMMs; what is saved for backward stays in the bf16 compute
  precision) and 4 with ``--dtype fp32``/``tf32``.

The GPU that runs out first decides: ``memory_per_gpu`` is the largest stage's total.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.memory.activations import activation_bytes, activation_memory
from willitscale.memory.state import WEIGHT_BYTES, state_parts
from willitscale.workload.flops import RECOMPUTE

__all__ = ["DEFAULT_MEMORY_FRACTION", "StageMemory", "default_convention", "stage_memory"]

#: share of HBM a plan may fill: the rest is left for what is not counted (CUDA context, NCCL
#: workspaces, allocator fragmentation: typically 1-5 GB on an 80 GB GPU). ``estimate`` and
#: ``plan`` judge "fits" by the same rule (``--memory-fraction``).
DEFAULT_MEMORY_FRACTION = 0.9


def default_convention(grad_reduce_dtype: str) -> str:
    """The training-state convention matching the gradient dtype."""
    return "handbook-18" if grad_reduce_dtype == "fp32" else "zero-16"


@dataclass(frozen=True, slots=True, kw_only=True)
class StageMemory:
    """Bytes per GPU of each stage column, arrays ``(plans, 3)``."""

    weights: np.ndarray
    gradients: np.ndarray
    optimizer: np.ndarray  #: optimizer states and master weights
    activations: np.ndarray  #: zeros when unknown (``known`` False)
    buffers: np.ndarray
    known: bool  #: activations could be computed (a model shape was given)

    @property
    def total(self) -> np.ndarray:
        return self.weights + self.gradients + self.optimizer + self.activations + self.buffers


def stage_memory(*, scenario, batch, convention: str, params_dense, params_expert, shard_dense,
                 shard_expert, layers, emb, head, in_flight, layer_params) -> StageMemory:
    """Memory per stage column for a batch of plans (see the module docstring)."""

    zero = batch.zero[:, None]
    weights, gradients, optimizer = state_parts(params_dense, params_expert, convention, zero,
                                                shard_dense[:, None], shard_expert[:, None])
    shape = np.shape(weights)
    pp = batch.pp.astype(float)
    tokens = batch.micro_batch * scenario.seq_len / batch.cp
    hidden = scenario.model.hidden if scenario.model is not None else 0
    element = activation_bytes(scenario.dtype)
    message = tokens * hidden * element / batch.tp
    buffers = np.where((pp > 1)[:, None], 2.0 * message[:, None], 0.0) + np.zeros(shape)
    buffers = buffers + np.where(zero == 3, 2.0 * layer_params * WEIGHT_BYTES, 0.0)
    plain_ddp = ((batch.tp == 1) & (batch.pp == 1) & (batch.cp == 1) & (batch.ep == 1)
                 & (batch.zero == 0) & (batch.dp > 1))[:, None]
    if not scenario.ddp.gradient_as_bucket_view:
        buffers = buffers + np.where(plain_ddp, gradients, 0.0)
    if scenario.model is None:
        return StageMemory(weights=weights, gradients=gradients, optimizer=optimizer,
                           activations=np.zeros(shape), buffers=buffers, known=False)

    modes = np.asarray(RECOMPUTE, dtype=object)[batch.recompute]
    act = activation_memory(scenario.model, scenario.seq_len / batch.cp, batch.micro_batch,
                            recompute=modes, tp=batch.tp, sequence_parallel=batch.sequence_parallel,
                            flash_attention=scenario.options.flash_attention, dtype_bytes=element)
    col = lambda x: np.broadcast_to(np.asarray(x, dtype=float), batch.dp.shape)[:, None]  # noqa: E731
    kept = layers * col(act.per_layer) + emb * col(act.embedding) + head * col(act.head)
    activations = in_flight * kept + col(act.recompute_transient)
    return StageMemory(weights=weights, gradients=gradients, optimizer=optimizer,
                       activations=activations, buffers=buffers, known=True)
