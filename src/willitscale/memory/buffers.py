"""Memory that is neither training state nor activations: communication buffers, framework
workspace, and the optimizer step's temporaries, per framework (arrays over plans x stage
columns). Derivations in docs/memory.md.

**Communication buffers** (alive during forward and backward):

* pipeline: the receive buffers of one forward and one backward message (``2 x`` a
  micro-batch's ``s b h / tp`` activations);
* ddp: DDP's buckets hold a copy of every fp32 gradient unless ``gradient_as_bucket_view``
  (PyTorch ``torch/nn/parallel/distributed.py``: "the saved memory size will be equal to the
  total gradients size"); the buckets exist on one process too (a model wrapped in DDP);
* deepspeed ZeRO-1/2 (fp16 or bf16): with ``contiguous_gradients`` (default) the
  backward copies gradients into ``buf_0 = torch.empty(reduce_bucket_size)`` of the weights'
  dtype, and a ``buf_1`` more "when overlap_comm is enabled" (``stage_1_and_2.py``);
  ``reduce_bucket_size`` 5e8 elements by default (``docs/_pages/config-json.md``). The BF16
  optimizer (bf16 with ZeRO off, stage 0) has no such buckets; its fp32 accumulator is state;
* deepspeed ZeRO-3: one reduce bucket (``__ipg_bucket_flat_buffer``) and the gathered weights:
  the layer being computed plus the prefetch bucket (``stage3_prefetch_bucket_size`` 5e8),
  at most ``stage3_max_live_parameters`` (1e9), never more than the stage holds;
* fsdp: the unsharded 16-bit units in flight. FULL_SHARD (``zero = 3``): PyTorch's own memory
  test counts "3x max unsharded block parameters" in forward and "1x max unsharded block
  parameters ... 2x max unsharded block gradients" in backward (``test_fully_shard_memory.py``
  @0334530): ``max(3 h, h + 2 g)`` per parameter of one layer. SHARD_GRAD_OP /
  ``reshard_after_forward=False`` (``zero = 2``): every layer of the stage unsharded, plus
  "1.5x max unsharded block parameters (reduce-scatter input/output)".

**Workspace**: cuBLAS's workspace of the compute stream (8,519,680 bytes: PyTorch's default
``:4096:2:16:8``, as measured in ``torch.cuda.memory_snapshot()`` on the PyTorch forum,
discuss.pytorch.org/t/178671); with ``ddp`` under autocast, the 16-bit copies of the matmul
weights (and biases) that autocast made in forward and autograd keeps for backward
(``docs/source/amp.rst``: linear/matmul autocast to 16-bit): ``h x`` the stage's linear
parameters.

**Optimizer step temporaries** (after the activations are freed): DeepSpeed's 16-bit stage 1/2
hands the optimizer an fp32 copy of the rank's gradient partition (``single_grad_partition``,
``4 / d`` per parameter); its fp16 stage 0 optimizer (``FP16_Optimizer``, what DeepSpeed wraps a
fused Adam in: ``engine.py`` @3293cf7 ``_configure_fp16_optimizer``, ``fused_opts =
(apex.optimizers.FusedAdam, FusedAdam)``; Megatron-DeepSpeed passes apex's FusedAdam,
``megatron/optimizer/__init__.py`` @541b967) builds ``_flatten_dense_tensors([... p.grad.to(fp32) for p in group])``: a list of
fp32 copies of every gradient and their flat concatenation are alive together while the fp16
gradients still are, ``8`` bytes per parameter (``runtime/fp16/fused_optimizer.py`` @3293cf7 =
v0.5.10, ``step``). Another optimizer gets ``FP16_UnfusedOptimizer``, which keeps one fp32
gradient per parameter, 4 bytes (not modelled: BigScience's 2021 logs that ran it,
``experiments/gpt2-meg-ds-3d``, peak at 20.1 B/param on their late stages, 16 + 4); the BF16 optimizer hands Adam a view of its fp32 accumulator (none); PyTorch's
default foreach AdamW (``--optimizer adamw-foreach``, ddp and fsdp) allocates
``exp_avg_sq.sqrt()`` out of place, 4 bytes per parameter it updates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.memory.frameworks import DDP, DEEPSPEED, FSDP

__all__ = ["DEEPSPEED_BUCKET_ELEMENTS", "DEEPSPEED_PREFETCH_ELEMENTS", "DEEPSPEED_MAX_LIVE",
           "CUBLAS_WORKSPACE_BYTES", "DeepSpeedOptions", "Buffers", "framework_buffers"]

#: DeepSpeed ``reduce_bucket_size`` default, elements (docs/_pages/config-json.md @ee3f19b)
DEEPSPEED_BUCKET_ELEMENTS = 5e8
#: ``stage3_prefetch_bucket_size`` and ``stage3_max_live_parameters`` defaults, elements
DEEPSPEED_PREFETCH_ELEMENTS = 5e8
DEEPSPEED_MAX_LIVE = 1e9
#: cuBLAS workspace of one stream under PyTorch's default CUBLAS_WORKSPACE_CONFIG
#: ":4096:2:16:8" = 2 x 4 MiB + 8 x 16 KiB (discuss.pytorch.org/t/178671: "It always occupies
#: this fixed size: 8519680B")
CUBLAS_WORKSPACE_BYTES = 8_519_680


@dataclass(frozen=True, slots=True, kw_only=True)
class DeepSpeedOptions:
    """DeepSpeed's ``zero_optimization`` settings that allocate memory."""

    reduce_bucket_elements: float = DEEPSPEED_BUCKET_ELEMENTS
    #: None: DeepSpeed's default, True for stage 3 only (deepspeed/runtime/zero/config.py
    #: ``overlap_comm_valid``: ``field_value = values["stage"] == 3``)
    overlap_comm: bool | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Buffers:
    """Bytes per GPU (arrays of the stage columns' shape)."""

    communication: np.ndarray  #: buckets, gathered weights, pipeline receive buffers
    workspace: np.ndarray  #: cuBLAS workspace, autocast's 16-bit weight copies
    step: np.ndarray  #: optimizer-step temporaries (after the activations are freed)


def _deepspeed(zero, h, stage_params, layer_params, options: DeepSpeedOptions, after_backward):
    """(buffers during forward/backward, buffers after the last backward) of DeepSpeed's ZeRO.

    ZeRO-1/2 allocate the ipg bucket in the optimizer's ``backward`` (``stage_1_and_2.py``
    @3293cf7). A pipeline stage other than the last runs its backward outside ZeRO
    (``pipe/engine.py`` ``_exec_backward_pass``: ``torch.autograd.backward``; only the last
    stage calls ``super().backward(self.loss)``) and reduces once after its last backward
    (``_exec_reduce_grads`` -> ``reduce_gradients(pipeline_parallel=True)``: "with PP we must
    create ipg buffer, since backward is handled outside zero", ``buf_0`` only); the epilogue
    releases it (``_release_ipg_buffers``) before the optimizer step. There (``after_backward``)
    the bucket is not alive with the activations."""
    bucket = options.reduce_bucket_elements * h
    overlap = (zero == 3) if options.overlap_comm is None else np.full(np.shape(zero), options.overlap_comm)
    ipg = np.where((zero == 1) | (zero == 2), bucket * np.where(overlap, 2.0, 1.0), 0.0)
    live = np.minimum(np.minimum(layer_params + DEEPSPEED_PREFETCH_ELEMENTS, DEEPSPEED_MAX_LIVE),
                      stage_params)
    z3 = np.where(zero == 3, bucket + live * h, 0.0)
    later = after_backward & ((zero == 1) | (zero == 2))
    return np.where(later, 0.0, ipg) + z3, np.where(later, bucket, 0.0)


def _fsdp(zero, h, g, stage_params, layer_params):
    reshard = np.maximum(3.0 * h, h + 2.0 * g) * layer_params
    keep = h * stage_params + 1.5 * h * layer_params
    return np.where(zero == 3, reshard, np.where(zero == 2, keep, 0.0))


def framework_buffers(*, framework, zero, dtype: str, grad_bytes: float, stage_params,
                      layer_params, linear_params, shard, pipeline_message,
                      gradient_as_bucket_view: bool, deepspeed: DeepSpeedOptions,
                      foreach_adamw: bool, reduce_after_backward=False) -> Buffers:
    """Buffers, workspace and step temporaries per stage column (the module docstring).

    ``framework``, ``zero``: ``(plans, 1)``; ``stage_params``, ``linear_params``: parameters one
    GPU holds per column, ``(plans, 3)``; ``layer_params``: the largest layer the column holds
    (the unit a gather holds at once, :mod:`willitscale.memory.layers`), ``(plans, 3)`` or
    ``(plans, 1)``;
    ``shard``: the shard group's size ``(plans, 1)``; ``pipeline_message``: bytes of one
    pipeline send, zero without pipelining; ``reduce_after_backward``: the columns whose
    gradients DeepSpeed's pipeline engine reduces after the last backward (every stage but the
    last, see :func:`_deepspeed`)."""
    h = 4.0 if dtype in ("fp32", "tf32") else 2.0
    bf16 = dtype == "bf16"
    fw, z = np.asarray(framework), np.asarray(zero)
    comm = 2.0 * np.asarray(pipeline_message, dtype=float) + 0.0 * stage_params
    comm = comm + np.where((fw == DDP) & (not gradient_as_bucket_view), 4.0 * stage_params, 0.0)
    during, after = _deepspeed(z, h, stage_params, layer_params, deepspeed,
                               np.asarray(reduce_after_backward, dtype=bool))
    comm = comm + np.where(fw == DEEPSPEED, during, 0.0)
    comm = comm + np.where(fw == FSDP, _fsdp(z, h, grad_bytes, stage_params, layer_params), 0.0)
    casts = np.where((fw == DDP) & (h < 4), h * linear_params, 0.0)
    workspace = CUBLAS_WORKSPACE_BYTES + casts
    fp16_stage = (fw == DEEPSPEED) & ~(bf16 & (z == 0))  # all but the BF16 optimizer
    step = np.where(fp16_stage & (z == 0) & (h < 4), 8.0 * stage_params,
                    np.where(fp16_stage & ((z == 1) | (z == 2)), 4.0 * stage_params / shard, 0.0))
    if foreach_adamw:
        local = np.where(z >= 1, stage_params / shard, stage_params)
        step = step + np.where((fw == DDP) | (fw == FSDP), 4.0 * local, 0.0)
    # the pipeline's reduce bucket is released before the step's temporaries are made
    step = np.maximum(step, np.where(fw == DEEPSPEED, after, 0.0))
    return Buffers(communication=comm, workspace=workspace + 0.0 * stage_params, step=step)
