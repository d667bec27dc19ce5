"""The models ``willitscale bench train`` can build, as :class:`Transformer` shapes (pure).

The benchmark's model (:mod:`willitscale.bench.gpt`) has the GPT-2 layout, so only GPT-2
shapes are offered: the four released sizes from the model catalog (Radford et al. 2019,
Table 2), and two of ours, ``gpt2-tiny`` and ``gpt2-mini``, small enough for a DDP step on a
CPU with Gloo in seconds. Ours are byte-level (vocab 256) because the benchmark's text is read
as bytes; the released shapes keep their 50,257-row embedding (so the gradient volume is the
real one) and see only the byte ids 0-255.

Parameter counts and FLOPs come from :mod:`willitscale.workload` -- the same functions the
estimate uses -- and ``tests/distributed`` checks them against the built torch module.
"""

from __future__ import annotations

from willitscale.errors import UnknownNameError
from willitscale.workload.transformer import Transformer

__all__ = ["BENCH_MODEL_NAMES", "bench_model", "LLAMA_MODELS", "build_bench_model", "OUR_MODELS", "FUSED_CAUSAL_ATTENTION"]

#: the benchmark's attention is ``scaled_dot_product_attention(is_causal=True)``: a fused kernel
#: (flash on CUDA and on CPU) that skips the masked blocks -- the estimate's FlashAttention
#: setting, whose executed FLOPs count half the attention scores. Calibration and validation
#: both describe the benchmark this way, so the efficiency fitted is the one the estimate applies.
FUSED_CAUSAL_ATTENTION = True

#: ours, defined in the model catalog (workload/models/gpt2.toml) so ``estimate`` knows them too
OUR_MODELS = ("gpt2-tiny", "gpt2-mini")
#: Llama-style shapes, built by :mod:`willitscale.bench.llama`
LLAMA_MODELS: dict[str, Transformer] = {
    # Llama 3.2 1B: huggingface.co/meta-llama/Llama-3.2-1B config.json (hidden_size 2048,
    # intermediate_size 8192, 32 heads, 8 key/value heads, 16 layers, vocab 128256, tied
    # embeddings, RoPE, RMSNorm, no biases)
    "llama-1b": Transformer(name="llama-1b", layers=16, hidden=2048, heads=32, kv_heads=8,
                            ffn_hidden=8192, gated_mlp=True, vocab=128256, max_positions=131072,
                            position="rope", norm="rmsnorm", bias=False, tied_embeddings=True,
                            source="huggingface.co/meta-llama/Llama-3.2-1B config.json"),
    "llama-tiny": Transformer(name="llama-tiny", layers=2, hidden=128, heads=4, kv_heads=2,
                              ffn_hidden=384, gated_mlp=True, vocab=256, max_positions=4096,
                              position="rope", norm="rmsnorm", bias=False, tied_embeddings=False,
                              source="willitscale: a CPU-sized Llama-style shape"),
}
CATALOG_MODELS = ("gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl")
BENCH_MODEL_NAMES = (*OUR_MODELS, *CATALOG_MODELS, *LLAMA_MODELS)


def bench_model(name: str) -> Transformer:
    """The shape of bench model ``name`` (one of :data:`BENCH_MODEL_NAMES`)."""
    if name in LLAMA_MODELS:
        return LLAMA_MODELS[name]
    if name in BENCH_MODEL_NAMES:
        from willitscale.workload.catalog import get_model

        return get_model(name)
    raise UnknownNameError("bench model", name, BENCH_MODEL_NAMES)


def build_bench_model(shape: Transformer):
    """The torch module of a bench shape: Llama-style for RMSNorm shapes, else GPT-2 (torch
    imported here: call it inside a worker)."""
    if shape.norm == "rmsnorm":
        from willitscale.bench.llama import Llama

        return Llama(shape)
    from willitscale.bench.gpt import GPT

    return GPT(shape)
