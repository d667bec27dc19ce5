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
* ``document_length``: intra-document masking. Each sample packs documents of this many tokens
  (``seq_len // document_length`` of them, and one of the remainder) and a query attends only
  to the earlier tokens of its own document, as FlashAttention's variable-length kernels
  (``cu_seqlens``), cuDNN's padded/ragged layouts or FlexAttention's document masks run it:
  the fused kernel executes the blocks inside documents and skips the rest. None: one
  document per sample (a plain causal mask). A length of ``seq_len`` or more is the same as
  None. It changes the attention kernel's work and rate (:mod:`willitscale.compute.attention`),
  not the model FLOPs that MFU counts (docs/estimate.md).
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
    document_length: int | None = None  #: tokens per packed document (intra-document masking)

    def __post_init__(self) -> None:
        d = self.document_length
        if d is not None and (isinstance(d, bool) or not isinstance(d, int) or d < 1):
            raise ConfigError("document_length", d, "an integer >= 1 (tokens per document)")
        for name, allowed in (("attention_kernel", ATTENTION_KERNELS), ("fusion", FUSIONS),
                              ("fp8_recipe", FP8_RECIPES)):
            if getattr(self, name) not in allowed:
                raise ConfigError(name, getattr(self, name), "one of " + ", ".join(allowed))
