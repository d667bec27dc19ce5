"""How the kernels of a training step are run: :class:`ComputeOptions`.

* ``attention_kernel``: the fused attention kernel (``auto``: the GPU's own, from
  ``compute/curves.toml``: FlashAttention-2 on A100, FlashAttention-3 on H100/H200,
  FlashAttention-4 on B200, CK on MI300X; or one of :data:`~willitscale.compute.curves.KERNELS`).
  ``--no-flash-attention`` (the scenario's ``flash_attention = false``) runs the unfused
  ``softmax(Q K^T) V`` instead.
* ``fusion``: ``fused`` (Megatron-LM / Transformer Engine kernels or ``torch.compile``: one
  kernel per norm, activation, rotary embedding, bias-dropout-residual, cross-entropy) or
  ``eager`` (PyTorch eager: one kernel per tensor operation, more bytes moved:
  :mod:`willitscale.compute.ops` counts both).
* ``fp8_recipe``: how FP8 GEMM inputs are scaled (with ``--dtype fp8``): ``delayed``
  (Transformer Engine's DelayedScaling, its default: the scale comes from an amax history, no
  extra pass), ``tensorwise`` (current scaling, one scale per tensor: an amax pass before each
  cast; torchao's default), ``rowwise`` (one scale per row: an amax pass, and the backward's
  transposed operands quantised again from the high-precision tensor).
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.compute.curves import KERNELS
from willitscale.errors import ConfigError

__all__ = ["ComputeOptions", "ATTENTION_KERNELS", "FUSIONS", "FP8_RECIPES"]

ATTENTION_KERNELS = ("auto", *KERNELS)
FUSIONS = ("fused", "eager")
FP8_RECIPES = ("delayed", "tensorwise", "rowwise")


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeOptions:
    attention_kernel: str = "auto"
    fusion: str = "fused"
    fp8_recipe: str = "delayed"

    def __post_init__(self) -> None:
        for name, allowed in (("attention_kernel", ATTENTION_KERNELS), ("fusion", FUSIONS),
                              ("fp8_recipe", FP8_RECIPES)):
            if getattr(self, name) not in allowed:
                raise ConfigError(name, getattr(self, name), "one of " + ", ".join(allowed))
