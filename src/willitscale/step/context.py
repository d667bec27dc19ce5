"""Context parallelism (ring attention): K/V blocks passed around the ring.

Each of the ``c`` context-parallel ranks holds ``s / c`` tokens of every sequence (Liu et al.
2023, "Ring Attention with Blockwise Transformers"; Megatron-Core's context parallelism). For each
layer's attention, every rank computes its queries against its own K/V block, then ``c - 1``
times sends its current block to the next rank and receives the previous rank's, overlapping
each transfer with the attention of the block it has:

* one block: ``b x (s / c) x 2 x kv_width / t`` elements (keys and values of the rank's heads
  after tensor parallelism; a replicated kv head counts whole), 2 bytes each;
* forward: ``c - 1`` send/recv steps per layer;
* backward: the blocks travel again and their gradients come back: twice the forward;
* full recomputation reruns the forward ring.

Exposed per layer = ``max(0, ring time - attention time)`` in each pass, the attention core
(``Q K^T`` and ``A V``) being what the transfers hide behind; its backward is twice its forward.
Weights are replicated over the context-parallel ranks, so their gradients are reduced over
``cp x dp`` ranks (:mod:`willitscale.topology.placement`).
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.lines import line_time
from willitscale.memory.activations import ACTIVATION_BYTES
from willitscale.step.traffic import Traffic

__all__ = ["context_traffic", "kv_block_bytes"]


def kv_block_bytes(*, micro_batch, seq_len: int, cp, tp, kv_heads: int, head_dim: int,
                   element: float = ACTIVATION_BYTES):
    """Bytes of one rank's K and V block for one layer."""
    heads = np.maximum(kv_heads / np.asarray(tp, dtype=float), 1.0)
    return (np.asarray(micro_batch, dtype=float) * seq_len / np.asarray(cp, dtype=float)
            * 2.0 * heads * head_dim * element)


def context_traffic(*, block_bytes, cp, layers, full_recompute, lines_p2p,
                    attention_seconds) -> Traffic:
    """Ring-attention traffic per micro-batch (arrays ``(plans, 3)``).

    ``attention_seconds`` is one layer's forward attention core time per micro-batch, (plans,).
    """
    steps = np.maximum(np.asarray(cp, dtype=float) - 1.0, 0.0)
    # one layer, forward, (plans,); not evaluated when no plan passes a block (cp = 1 only)
    ring = steps * line_time(lines_p2p, block_bytes) if steps.any() else np.zeros_like(steps)
    full = np.asarray(full_recompute, dtype=float)
    attn = np.asarray(attention_seconds, dtype=float)
    fwd_layer, bwd_layer = ring, (2.0 + full) * ring
    fwd_exp = np.maximum(0.0, fwd_layer - attn)
    bwd_exp = np.maximum(0.0, 2.0 * ring - 2.0 * attn) + full * fwd_exp
    per_layer_bytes = steps * np.asarray(block_bytes, dtype=float) * (3.0 + full)
    calls = steps * (3.0 + full)
    col = lambda x: layers * np.asarray(x)[:, None]  # noqa: E731
    return Traffic(kind="cp", op="send_recv", fwd=col(fwd_layer), bwd=col(bwd_layer),
                   fwd_exposed=col(fwd_exp), bwd_exposed=col(bwd_exp),
                   bytes=col(per_layer_bytes), calls=col(calls))
