"""What each training framework keeps per parameter, and what a plan implies when none is named.

Four frameworks, each with the ZeRO stages it implements (``plan.zero`` names the sharding:
0 nothing, 1 optimizer states + master weights, 2 + gradients, 3 + weights):

===========  ======  ============================================================================
framework    stages  what the stages are
===========  ======  ============================================================================
megatron     0, 1    Megatron-LM / NeMo (Megatron-Core). 1 = the distributed optimizer: a full
                     contiguous gradient buffer, reduce-scattered once per step, fp32 main
                     weights and Adam states sharded (``6 + 12/d`` bytes per parameter)
fsdp         2, 3    PyTorch FSDP1/FSDP2 with bf16/fp16 ``MixedPrecision`` over fp32 sharded
                     parameters (16/d). 3 = FULL_SHARD / ``reshard_after_forward=True``;
                     2 = SHARD_GRAD_OP / ``reshard_after_forward=False`` (every layer's unsharded
                     weights stay alive from its forward to its backward)
deepspeed    0-3     DeepSpeed ZeRO (``stage_1_and_2.py``, ``stage3.py``), 16-bit weights and
                     gradients, fp32 master weights and Adam states; bf16 with stage 0 is the
                     BF16 optimizer (ZeRO off: the engine picks it; fp32 master and Adam
                     sharded over d, an unsharded fp32 gradient accumulator, 4 bytes more);
                     bf16 with stage 1/2 is the ZeRO optimizer in bf16, as fp16
ddp          0       PyTorch DDP + ``torch.autocast``: fp32 weights, fp32 gradients, their copy
                     in DDP's buckets, fp32 Adam states, and 16-bit copies of the weights the
                     autocast matmuls made (kept for backward)
===========  ======  ============================================================================

Bytes per parameter of each part, ``h`` the weights' 16-bit width (4 for fp32 training), ``g``
the gradients' width (``--grad-reduce-dtype``: what is reduced is what is stored; DeepSpeed
stores the weights' width whatever it reduces in), ``d`` the
shard group (sources in ``SOURCES``; derivations in docs/memory.md):

=========================  =========  ============  ==============  =========
framework, stage           weights    gradients     master          optimizer
=========================  =========  ============  ==============  =========
megatron 0                 h          g (+4 if g<4) 4 (0 if fp32)   8
megatron 1 (dist. opt.)    h          g (+4/d)      4/d             8/d
fsdp 2, 3                  4/d        4/d           0               8/d
deepspeed 0                h          h             4               8
deepspeed 0, bf16          h          h + 4         4/d             8/d
deepspeed 1                h          h             4/d             8/d
deepspeed 2                h          h/d           4/d             8/d
deepspeed 3                h/d        h/d           4/d             8/d
ddp 0                      4          4             0               8
=========================  =========  ============  ==============  =========

(megatron with ``g < 4`` keeps an fp32 copy of the main gradients for the optimizer: the "20"
and "4 + 16/d" of Megatron-Core's fp16 row; deepspeed bf16 stage 0, the BF16 optimizer, adds 4
unsharded bytes and shards the rest: DeepSpeed ``engine.py`` @56c5223 picks it only when ZeRO is
off, ``if self.zero_optimization(): ... elif self.fp16_enabled(): ... elif
self.bfloat16_enabled(): self._configure_bf16_optimizer``; ``bf16_optimizer.py`` @56c5223 keeps
``fp32_groups_flat_partition`` (the rank's partition) and ``fp32_groups_gradients_flat``
(``zeros_like`` the whole bf16 flat buffer, fp32). BigScience: "ZERO_STAGE=0 # important: bf16
must use z0! it implements its own zero stage 1 equivalent", tr11-176B-ml.slurm @dc8d99f.)
Buffers, workspace and step-time temporaries are in :mod:`.buffers`.

When ``--framework`` is not given, the plan implies one (:func:`implied_framework`): ZeRO-3 ->
fsdp; ZeRO-2 -> deepspeed; tensor, pipeline, context or expert parallelism -> megatron (ZeRO 0
or 1); otherwise ZeRO-1 -> deepspeed and no ZeRO -> ddp.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

import numpy as np

from willitscale.errors import ConfigError

__all__ = ["FRAMEWORKS", "FRAMEWORK_STAGES", "SOURCES", "StateBytes", "framework_index",
           "convention_table", "layout_text",
           "implied_framework", "check_framework_stage", "state_bytes_table"]

FRAMEWORKS = ("megatron", "fsdp", "deepspeed", "ddp")
MEGATRON, FSDP, DEEPSPEED, DDP = range(4)

#: the ZeRO stages each framework implements
FRAMEWORK_STAGES: Mapping[str, tuple[int, ...]] = MappingProxyType({
    "megatron": (0, 1), "fsdp": (2, 3), "deepspeed": (0, 1, 2, 3), "ddp": (0,)})

#: where each framework's bytes come from (docs/memory.md quotes them)
SOURCES: Mapping[str, str] = MappingProxyType({
    "megatron": "NVIDIA/Megatron-LM docs/user-guide/features/dist_optimizer.md @859b66a (bytes per "
                "parameter: 18 / 6 + 12/d bf16 params + fp32 grads, 20 / 4 + 16/d fp16, 16 / 8 + "
                "8/d fp32; 'contiguous buffers for parameters and main gradients')",
    "fsdp": "pytorch/pytorch torch/distributed/fsdp/_fully_shard/_fully_shard.py @0257dd1 ('FSDP "
            "does not require any extra memory to keep a high-precision copy of the parameters for "
            "the optimizer step'); torch/distributed/fsdp/api.py @0aafd81 (MixedPrecision: 'the "
            "*sharded* parameters are kept in full precision'; keep_low_precision_grads=False "
            "upcasts gradients)",
    "deepspeed": "microsoft/DeepSpeed deepspeed/runtime/zero/stage_1_and_2.py @4fea41f; "
                 "deepspeed/runtime/engine.py and bf16_optimizer.py @56c5223 (the BF16 optimizer "
                 "only with ZeRO off; fp32 partition + whole fp32 gradient buffer); "
                 "bigscience-workshop/bigscience train/tr11-176B-ml/chronicles-prequel.md @59a90ee "
                 "(BF16 optimizer: 'The additional memory usage is 4bytes x params and it's not "
                 "sharded across gpus')",
    "ddp": "pytorch/pytorch torch/nn/parallel/distributed.py @0028a16 (gradient_as_bucket_view="
           "False: 'the saved memory size will be equal to the total gradients size'); "
           "docs/source/amp.rst @0137a5f (autocast casts the inputs of linear/matmul to 16-bit)",
})


def framework_index(name: str) -> int:
    """The code of a framework name (a ConfigError naming the valid ones otherwise)."""
    try:
        return FRAMEWORKS.index(name)
    except ValueError:
        raise ConfigError("framework", name, "one of " + ", ".join(FRAMEWORKS)) from None


def implied_framework(zero, model_parallel):
    """Framework codes a plan implies (arrays): see the module docstring."""
    z = np.asarray(zero)
    mp = np.asarray(model_parallel, dtype=bool)
    return np.where(z == 3, FSDP, np.where(z == 2, DEEPSPEED, np.where(
        mp, MEGATRON, np.where(z == 1, DEEPSPEED, DDP)))).astype(np.int64)


def check_framework_stage(framework: str, zero: int) -> None:
    """A ConfigError unless ``framework`` implements ZeRO stage ``zero``."""
    stages = FRAMEWORK_STAGES[framework]
    if zero not in stages:
        hint = {"megatron": "1 is its distributed optimizer; ZeRO-2/3: --framework deepspeed "
                            "or fsdp",
                "fsdp": "3 = FULL_SHARD, 2 = SHARD_GRAD_OP (no reshard after forward)",
                "ddp": "sharding: --framework deepspeed (ZeRO-1/2/3) or fsdp (ZeRO-2/3)"}.get(
                    framework, "")
        raise ConfigError("zero", zero, f"one of {', '.join(map(str, stages))} with framework "
                          f"{framework} (--framework, or the framework a Megatron-LM, NeMo or "
                          f"torchtitan job file runs)" + (f"; {hint}" if hint else ""))


@dataclass(frozen=True, slots=True, kw_only=True)
class StateBytes:
    """Bytes per parameter of each part, ``(replicated, sharded over d)``, arrays indexed
    ``[framework, zero]`` (nan where the framework has no such stage)."""

    weights: np.ndarray  #: (4, 4, 2)
    gradients: np.ndarray
    master: np.ndarray
    optimizer: np.ndarray


def _row(weights, gradients, master, optimizer):
    return np.array([weights, gradients, master, optimizer], dtype=float)


def _megatron(zero: int, h: float, g: float):
    main_copy = 4.0 if g < 4 else 0.0  # fp32 main gradients for the optimizer
    master = 4.0 if h < 4 else 0.0
    if zero == 0:
        return _row((h, 0), (g + main_copy, 0), (master, 0), (8, 0))
    return _row((h, 0), (g, main_copy), (0, master), (0, 8))


def _fsdp(h: float):
    del h  # the unsharded 16-bit copies are buffers (memory.buffers), not state
    return _row((0, 4), (0, 4), (0, 0), (0, 8))


def _deepspeed(zero: int, h: float, g: float, bf16: bool):
    master = 4.0 if h < 4 else 0.0
    weights = (0, h) if zero == 3 else (h, 0)
    if bf16 and zero == 0:
        # the BF16 optimizer: bf16 gradients + an unsharded fp32 accumulator; its fp32 master
        # and Adam states are partitioned over the data-parallel group (bf16_optimizer.py)
        return _row(weights, (h + 4.0, 0), (0, master), (0, 8))
    # ZeRO keeps gradients in the weights' dtype whatever the reduction's dtype: param.grad of
    # the 16-bit weights, stage_1_and_2.py's ``grads_in_partition`` and ipg buffers, stage3.py's
    # partitions, all ``dtype=self.dtype`` (``communication_data_type`` only casts for the
    # collective); ``g`` is the wire width, not the storage
    del g
    grads = (0, h) if zero >= 2 else (h, 0)
    if zero == 0:
        return _row(weights, grads, (master, 0), (8, 0))
    return _row(weights, grads, (0, master), (0, 8))


def _ddp():
    return _row((4, 0), (4, 0), (0, 0), (8, 0))


def state_bytes_table(dtype: str, grad_bytes: float) -> StateBytes:
    """The framework x stage table of bytes per parameter for a compute ``dtype`` and a
    gradient width ``grad_bytes`` (the module docstring's table)."""
    h = 4.0 if dtype in ("fp32", "tf32") else 2.0
    table = np.full((len(FRAMEWORKS), 4, 4, 2), np.nan)
    for z in FRAMEWORK_STAGES["megatron"]:
        table[MEGATRON, z] = _megatron(z, h, grad_bytes)
    for z in FRAMEWORK_STAGES["fsdp"]:
        table[FSDP, z] = _fsdp(h)
    for z in FRAMEWORK_STAGES["deepspeed"]:
        table[DEEPSPEED, z] = _deepspeed(z, h, grad_bytes, dtype == "bf16")
    table[DDP, 0] = _ddp()
    return StateBytes(weights=table[:, :, 0], gradients=table[:, :, 1], master=table[:, :, 2],
                      optimizer=table[:, :, 3])


def _sharded_parts(framework: int, zero: int) -> tuple[bool, bool, bool, bool]:
    """Which of (weights, gradients, master, optimizer) a framework's stage shards."""
    if framework == FSDP:
        return True, True, True, True
    return zero >= 3, zero >= 2, zero >= 1, zero >= 1


def convention_table(weights: float, gradients: float, master: float, optimizer: float) -> StateBytes:
    """A :class:`StateBytes` from a convention's bytes per parameter (``--memory-convention``),
    each part sharded where the framework's stage shards it."""
    table = np.full((len(FRAMEWORKS), 4, 4, 2), np.nan)
    parts = (weights, gradients, master, optimizer)
    for name, stages in FRAMEWORK_STAGES.items():
        fw = FRAMEWORKS.index(name)
        for z in stages:
            flags = _sharded_parts(fw, z)
            table[fw, z] = [(0.0, b) if f else (b, 0.0) for b, f in zip(parts, flags)]
    return StateBytes(weights=table[:, :, 0], gradients=table[:, :, 1], master=table[:, :, 2],
                      optimizer=table[:, :, 3])


def layout_text(framework: str, zero: int, table: StateBytes) -> str:
    """The bytes per parameter of one framework stage, e.g. ``"6 + 12/d B/param"``."""
    fw, parts = FRAMEWORKS.index(framework), (table.weights, table.gradients, table.master,
                                              table.optimizer)
    rep = sum(float(p[fw, zero, 0]) for p in parts)
    sh = sum(float(p[fw, zero, 1]) for p in parts)
    terms = ([f"{rep:g}"] if rep else []) + ([f"{sh:g}/d"] if sh else [])
    return " + ".join(terms or ["0"]) + " B/param"
