"""The models ``willitscale bench train`` can build, as :class:`Transformer` shapes (pure).

The GPT-2 family shapes are those of Radford et al. 2019, "Language Models are Unsupervised
Multitask Learners", Table 2 (layers, d_model; 12/768, 24/1024, 36/1280, 48/1600), with the
vocabulary of 50,257 tokens and 1,024 positions of the released checkpoints (heads: 12, 16,
20, 25 as in those checkpoints' configs). The ``tiny`` and ``mini`` shapes are ours: small
enough for a DDP step on a CPU with Gloo in seconds, byte-level (vocab 256) because the
benchmark's text is read as bytes. The GPT-2 shapes keep their 50,257-row embedding (the
gradient volume is then the real one) and see only the byte ids 0-255.
"""

from __future__ import annotations

from willitscale.errors import UnknownNameError
from willitscale.workload.transformer import Transformer

__all__ = ["BENCH_MODELS", "bench_model", "parameter_count", "train_flops_per_step"]

_GPT2_SOURCE = "Radford et al. 2019, Table 2; HF gpt2 configs (vocab 50257, n_positions 1024)"

BENCH_MODELS: dict[str, Transformer] = {
    "gpt2-tiny": Transformer(name="gpt2-tiny", layers=2, hidden=128, heads=4, vocab=256,
                             max_positions=512, source="willitscale: a CPU-sized GPT-2 shape"),
    "gpt2-mini": Transformer(name="gpt2-mini", layers=4, hidden=256, heads=8, vocab=256,
                             max_positions=512, source="willitscale: a CPU-sized GPT-2 shape"),
    "gpt2": Transformer(name="gpt2", layers=12, hidden=768, heads=12, vocab=50257,
                        max_positions=1024, source=_GPT2_SOURCE),
    "gpt2-medium": Transformer(name="gpt2-medium", layers=24, hidden=1024, heads=16, vocab=50257,
                               max_positions=1024, source=_GPT2_SOURCE),
    "gpt2-large": Transformer(name="gpt2-large", layers=36, hidden=1280, heads=20, vocab=50257,
                              max_positions=1024, source=_GPT2_SOURCE),
    "gpt2-xl": Transformer(name="gpt2-xl", layers=48, hidden=1600, heads=25, vocab=50257,
                           max_positions=1024, source=_GPT2_SOURCE),
}


def bench_model(name: str) -> Transformer:
    try:
        return BENCH_MODELS[name]
    except KeyError:
        raise UnknownNameError("bench model", name, BENCH_MODELS) from None


def parameter_count(shape: Transformer) -> int:
    """Parameters of :class:`willitscale.bench.gpt.GPT` built from ``shape`` (GPT-2 layout:
    biases everywhere, two LayerNorms per block and one final, tied LM head).

    Per block: attention ``4h^2 + 4h`` (q, k, v and output projections with biases), MLP
    ``2 h f + f + h``, two LayerNorms ``4h``. Embeddings ``V h + P h``; final LayerNorm ``2h``.
    GPT-2 small: 12 x (4*768^2 + 4*768 + 2*768*3072 + 3072 + 768 + 4*768) + 50257*768
    + 1024*768 + 2*768 = 124,439,808, the published checkpoint's count.
    """
    h, f = shape.hidden, shape.ffn_hidden
    block = (4 * h * h + 4 * h) + (2 * h * f + f + h) + 4 * h
    return shape.layers * block + shape.vocab * h + shape.max_positions * h + 2 * h


def train_flops_per_step(shape: Transformer, seq_len: int, sequences: int) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 x forward) on ``sequences``
    sequences of ``seq_len`` tokens.

    Forward, per token: ``2 x`` the weights it multiplies (per block ``4h^2 + 2hf``, plus the
    LM head ``hV``) and the attention scores and weighted sum, ``2 x 2 x seq_len x h`` per
    block (full, not causal-halved: the kernels compute the whole square). Embedding lookups,
    LayerNorms, softmax and biases are not matmuls and are left out.
    """
    h, f = shape.hidden, shape.ffn_hidden
    weights = shape.layers * (4 * h * h + 2 * h * f) + h * shape.vocab
    attention = shape.layers * 2 * seq_len * h
    forward_per_token = 2.0 * (weights + attention)
    return 3.0 * forward_per_token * seq_len * sequences
