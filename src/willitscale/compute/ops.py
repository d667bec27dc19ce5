"""Memory-bound operations: bytes moved and kernels launched, per element, fused or eager.

Each row is one operation of a transformer layer (or of the head, or the embedding) whose time
is bytes over the achievable HBM bandwidth plus a fixed cost per kernel. Bytes are per element
of the tensor it runs over (bf16 activations, 2 bytes), counted pass by pass: a kernel reads its
inputs and writes its outputs once; the backward reads what it needs and writes the gradient.

**Fused** (Megatron-LM, Transformer Engine, ``torch.compile``): one kernel per operation.

* norm (LayerNorm or RMSNorm) over ``h``: forward reads x, writes y (2 + 2); backward reads x
  and dy, writes dx (6), a second kernel reduces the weight gradient;
* rotary embedding over q and k: read, write (4) both ways;
* bias-dropout-residual over ``h`` (twice per layer): read the branch and the residual, write
  the sum (6), plus a 1-byte mask with dropout; backward: read dy (and the mask), write dx,
  accumulate into the residual stream's gradient (6, + 1);
* activation over ``ffn``: SwiGLU reads gate and up, writes the product (6); backward reads
  gate, up and dy, writes both gradients (10); GeLU (bias fused): 4 and 6;
* attention scores (unfused attention only) over ``heads x keys``: scale-mask-softmax (4),
  dropout (5) forward; softmax backward (6), dropout backward (5);
* cross-entropy over the vocabulary (a vocabulary-parallel or fused kernel): forward reads the
  logits and writes the gradient while it has them (2 + 2 + 2 for the max and sum passes),
  backward scales it (2 + 2);
* embedding over ``h``: gather (2 + 2); backward: scatter-add into the fp32 gradient (2 + 8).

**Eager** PyTorch runs one kernel per tensor operation (Hugging Face-style Llama code, IBM's
fms): RMSNorm as ``x.float()`` (2 + 4), ``pow`` (4 + 4), ``mean`` (4), multiply by ``rsqrt``
(4 + 4), ``.to(bf16)`` (4 + 2), multiply by the weight (2 + 2) = 32, its backward about twice
that (64, 10 kernels); rotary as ``rotate_half`` (slice, negate, concatenate: 6) and ``q cos +
rotate_half(q) sin`` (4 + 4 + 6) = 20 both ways; SwiGLU as ``silu`` (4) then multiply (6) = 10,
backward 16 (3 kernels); the residual add (6) and its gradient accumulation (6) as separate
kernels; cross-entropy as ``.float()`` (2 + 4), ``log_softmax`` (4 + 4) and ``nll`` = 14 both
ways. ``torch.nn.LayerNorm`` is one kernel in eager PyTorch too (as fused). These counts are
ours, read from the operations the code runs (a named approximation: the allocator, views and
broadcasting tensors are not counted).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["MemOp", "mem_op", "fp8_cast_bytes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class MemOp:
    """Bytes per element and kernels of one memory-bound operation, forward and backward."""

    fwd_bytes: float
    bwd_bytes: float
    fwd_kernels: float
    bwd_kernels: float


_FUSED = {
    "norm": MemOp(fwd_bytes=4, bwd_bytes=6, fwd_kernels=1, bwd_kernels=2),
    "rotary": MemOp(fwd_bytes=4, bwd_bytes=4, fwd_kernels=1, bwd_kernels=1),
    "residual": MemOp(fwd_bytes=6, bwd_bytes=6, fwd_kernels=1, bwd_kernels=1),
    "swiglu": MemOp(fwd_bytes=6, bwd_bytes=10, fwd_kernels=1, bwd_kernels=1),
    "gelu": MemOp(fwd_bytes=4, bwd_bytes=6, fwd_kernels=1, bwd_kernels=1),
    "scores": MemOp(fwd_bytes=4, bwd_bytes=6, fwd_kernels=1, bwd_kernels=1),
    "cross_entropy": MemOp(fwd_bytes=6, bwd_bytes=4, fwd_kernels=3, bwd_kernels=1),
    "embedding": MemOp(fwd_bytes=4, bwd_bytes=10, fwd_kernels=1, bwd_kernels=1),
}
_EAGER = {
    **_FUSED,
    "rmsnorm": MemOp(fwd_bytes=32, bwd_bytes=64, fwd_kernels=6, bwd_kernels=10),
    "rotary": MemOp(fwd_bytes=20, bwd_bytes=20, fwd_kernels=5, bwd_kernels=5),
    "residual": MemOp(fwd_bytes=6, bwd_bytes=6, fwd_kernels=1, bwd_kernels=1),
    "swiglu": MemOp(fwd_bytes=10, bwd_bytes=16, fwd_kernels=2, bwd_kernels=3),
    "scores": MemOp(fwd_bytes=12, bwd_bytes=12, fwd_kernels=3, bwd_kernels=3),
    "cross_entropy": MemOp(fwd_bytes=14, bwd_bytes=14, fwd_kernels=3, bwd_kernels=3),
}
#: dropout: a 1-byte mask written forward and read backward, and in eager mode its own kernel
#: reading and writing the tensor (2 + 2 + 1 each way)
_DROPOUT_FUSED = MemOp(fwd_bytes=1, bwd_bytes=1, fwd_kernels=0, bwd_kernels=0)
_DROPOUT_EAGER = MemOp(fwd_bytes=5, bwd_bytes=5, fwd_kernels=1, bwd_kernels=1)


def mem_op(name: str, fusion: str, *, rms: bool = False, dropout: bool = False) -> MemOp:
    """The :class:`MemOp` of ``name`` (norm, rotary, residual, swiglu, gelu, scores,
    cross_entropy, embedding) under ``fusion`` (fused or eager)."""
    table = _EAGER if fusion == "eager" else _FUSED
    op = table["rmsnorm"] if (name == "norm" and rms and fusion == "eager") else table[name]
    if dropout and name in ("residual", "scores"):
        extra = _DROPOUT_EAGER if fusion == "eager" else _DROPOUT_FUSED
        op = MemOp(fwd_bytes=op.fwd_bytes + extra.fwd_bytes, bwd_bytes=op.bwd_bytes + extra.bwd_bytes,
                   fwd_kernels=op.fwd_kernels + extra.fwd_kernels,
                   bwd_kernels=op.bwd_kernels + extra.bwd_kernels)
    return op


def fp8_cast_bytes(recipe: str, *, transpose: bool) -> tuple[float, float]:
    """``(bytes per element of one operand's cast, extra bytes when the backward needs the other
    orientation)`` of an FP8 GEMM operand (Transformer Engine's and torchao's recipes).

    A cast reads bf16 (2) and writes FP8 (1); on Hopper, whose tensor cores cannot read FP8
    column-wise, a transposed copy is written too (+1: Transformer Engine's documentation,
    "Handling transposes"). ``tensorwise`` (current scaling) first reads the tensor for its
    amax (+2); ``delayed`` takes its scale from the amax history. ``rowwise`` reads for the
    row amax (+2) and quantises the other orientation again from the bf16 tensor for the
    backward (2 + 2 + 1 more) instead of transposing."""
    base = 3.0
    if recipe == "delayed":
        return base + (1.0 if transpose else 0.0), 0.0
    if recipe == "tensorwise":
        return base + 2.0 + (1.0 if transpose else 0.0), 0.0
    return base + 2.0, 5.0
