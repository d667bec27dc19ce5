"""Shapes of the current Hugging Face families from their ``config.json``: Qwen3 and the Qwen MoE
models, DeepSeek-V2/V3 (multi-head latent attention, shared experts, dense-first layers),
Gemma 2/3, Phi-3 and OLMo 2 (:mod:`.hf` holds the loader and the older families).

Each reader takes the keys that change a parameter, FLOP or activation count, with the defaults
of the family's ``transformers`` configuration class where a released config may leave a key
out. What each family's modelling code builds, as the shape fields say it:

* **Qwen3** (``qwen3``): Llama with an explicit ``head_dim`` (Qwen3-0.6B: 16 x 128 = 2,048
  query width on a 1,024 hidden) and a per-head RMSNorm on q and k (``q_norm``, ``k_norm``).
* **Qwen2-MoE / Qwen3-MoE** (``qwen2_moe``, ``qwen3_moe``): ``num_experts`` experts of
  ``moe_intermediate_size``, ``num_experts_per_tok`` per token, on the layers that are sparse
  (``(i + 1) % decoder_sparse_step == 0`` and not in ``mlp_only_layers``; the others have a
  dense MLP of ``intermediate_size``). Qwen2-MoE adds one shared expert of
  ``shared_expert_intermediate_size`` with a ``hidden -> 1`` sigmoid gate, and q/k/v biases;
  Qwen3-MoE has QK-norm and no shared expert.
* **DeepSeek-V2/V3** (``deepseek_v2``, ``deepseek_v3``): multi-head latent attention
  (``q_lora_rank`` — null in V2-Lite —, ``kv_lora_rank``, ``qk_nope_head_dim``,
  ``qk_rope_head_dim``, ``v_head_dim``); layer ``i`` is MoE when ``i >= first_k_dense_replace``
  and ``i % moe_layer_freq == 0``, with ``n_routed_experts`` experts of
  ``moe_intermediate_size``, ``num_experts_per_tok`` per token and ``n_shared_experts`` shared
  experts (one MLP of ``n_shared_experts x moe_intermediate_size``); the other layers a dense MLP
  of ``intermediate_size``. DeepSeek-V3's multi-token-prediction module
  (``num_nextn_predict_layers``, 14B parameters in the released weights) is not part of the
  Hugging Face model and is not counted.
* **Gemma 2 / Gemma 3** (``gemma2``, ``gemma3_text``; ``gemma3`` reads its ``text_config``,
  the vision tower is not counted): GeGLU MLP, ``head_dim`` apart from ``hidden / heads``, four
  RMSNorms per layer, tied embeddings, a sliding window on some layers: Gemma 2 on every other
  layer (layer ``i`` is local when ``i`` is even), Gemma 3 on five in six (local unless
  ``(i + 1) % sliding_window_pattern == 0``), or as ``layer_types`` lists them; Gemma 3 adds
  per-head QK-norm.
* **Phi-3** (``phi3``): Llama's shape with fused ``qkv_proj`` and ``gate_up_proj`` (the same
  matrices) and, in the 4K-context models, a sliding window.
* **OLMo 2** (``olmo2``): Llama's shape, RMSNorm on the whole q and k (``q_norm`` over
  ``heads x head_dim``, ``k_norm`` over ``kv_heads x head_dim``) and two norms per layer placed
  after the attention and the MLP.

A layer pattern (which layers are dense or windowed) is kept as a count: per-layer costs are
the mean layer's (:mod:`.transformer`).
"""

from __future__ import annotations

from typing import Any

from willitscale.config import Table
from willitscale.errors import ConfigError

__all__ = ["FAMILIES"]


def _optional_int(t: Table, key: str, default: int | None = None) -> int | None:
    def convert(v: Any) -> int | None:
        if v is None:
            return None
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError
        return v

    return t.get(key, convert, "a positive integer or null", default)


def _int_list(t: Table, key: str) -> list[int]:
    def convert(v: Any) -> list[int]:
        if not isinstance(v, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
            raise ValueError
        return v

    return t.get(key, convert, "a list of layer indices", [])


def _str_list(t: Table, key: str) -> list[str] | None:
    def convert(v: Any) -> list[str] | None:
        if v is None:
            return None
        if not isinstance(v, list) or not all(isinstance(i, str) for i in v):
            raise ValueError
        return v

    return t.get(key, convert, "a list of layer type names or null", None)


def _base(t: Table, llama_like) -> dict[str, Any]:
    return llama_like(t) | dict(qkv_bias=t.bool("attention_bias", False),
                                attn_out_bias=t.bool("attention_bias", False))


def _qwen3(t: Table, llama_like) -> dict[str, Any]:
    # Qwen3Config's head_dim defaults to 128
    return _base(t, llama_like) | dict(head_dim=t.int("head_dim", 128, min=1), qk_norm="head",
                                       sliding_window=_qwen_window(t))


def _qwen_window(t: Table) -> int | None:
    # Qwen's sliding window applies only when enabled (use_sliding_window, false in releases)
    return _optional_int(t, "sliding_window") if t.bool("use_sliding_window", False) else None


def _qwen_moe_layers(t: Table, layers: int) -> int:
    """Dense layers of a Qwen MoE config (``mlp_only_layers``, ``decoder_sparse_step``)."""
    step = t.int("decoder_sparse_step", 1, min=1)
    only = set(_int_list(t, "mlp_only_layers"))
    sparse = [i for i in range(layers) if i not in only and (i + 1) % step == 0]
    _dense_first(t, layers, sparse, "decoder_sparse_step / mlp_only_layers")
    return layers - len(sparse)


def _dense_first(t: Table, layers: int, sparse: list[int], keys: str) -> None:
    """The model places dense layers first (a dense prefix, then MoE layers: every config in
    the supported releases); dense layers elsewhere would be counted per stage as if they came
    first, so they are refused rather than misplaced."""
    if sparse and sparse != list(range(layers - len(sparse), layers)):
        dense = [i for i in range(layers) if i not in set(sparse)]
        raise ConfigError(f"{t.where}: {keys}", f"dense layers {dense[:8]}{' ...' if len(dense) > 8 else ''}",
                          "dense layers only before the MoE layers (the first k layers dense); "
                          "interleaved dense and MoE layers are not modelled")


def _qwen_moe(t: Table, llama_like, *, shared: bool) -> dict[str, Any]:
    shape = llama_like(t)
    experts = t.int("num_experts", min=1)
    dense = _qwen_moe_layers(t, shape["layers"])
    shape |= dict(ffn_hidden=t.int("moe_intermediate_size", min=1), moe_experts=experts,
                  moe_top_k=t.int("num_experts_per_tok", min=1), dense_layers=dense,
                  dense_ffn=t.int("intermediate_size", min=1) if dense else None,
                  sliding_window=_qwen_window(t))
    if shared:  # Qwen2-MoE: q/k/v biases, one gated shared expert
        width = t.int("shared_expert_intermediate_size", 0, min=0)
        return shape | dict(qkv_bias=True, moe_shared_ffn=width, moe_shared_gate=width > 0)
    return shape | dict(head_dim=t.int("head_dim", 128, min=1), qk_norm="head",
                        qkv_bias=t.bool("attention_bias", False),
                        attn_out_bias=t.bool("attention_bias", False))


def _deepseek(t: Table, llama_like) -> dict[str, Any]:
    shape = llama_like(t)
    layers, heads = shape["layers"], shape["heads"]
    nope, rope = t.int("qk_nope_head_dim", min=1), t.int("qk_rope_head_dim", min=1)
    routed = _optional_int(t, "n_routed_experts")
    first = t.int("first_k_dense_replace", 0, min=0)
    freq = t.int("moe_layer_freq", 1, min=1)
    sparse = [i for i in range(layers) if i >= first and i % freq == 0] if routed else []
    _dense_first(t, layers, sparse, "first_k_dense_replace / moe_layer_freq")
    moe_layers = len(sparse)
    shape |= dict(kv_heads=heads, head_dim=nope + rope, v_head_dim=t.int("v_head_dim", min=1),
                  q_lora_rank=_optional_int(t, "q_lora_rank"),
                  kv_lora_rank=t.int("kv_lora_rank", min=1), rope_head_dim=rope,
                  qkv_bias=t.bool("attention_bias", False), attn_out_bias=t.bool("attention_bias", False))
    if not moe_layers:
        return shape
    moe_width = t.int("moe_intermediate_size", min=1)
    shared = _optional_int(t, "n_shared_experts") or 0
    dense = layers - moe_layers
    return shape | dict(ffn_hidden=moe_width,
                        dense_ffn=t.int("intermediate_size", min=1) if dense else None,
                        moe_experts=routed, moe_top_k=t.int("num_experts_per_tok", min=1),
                        dense_layers=dense, moe_shared_ffn=shared * moe_width)


def _window_layers(t: Table, layers: int, local) -> int:
    """Layers with the sliding window: ``layer_types`` when the config lists them, else the
    family's rule ``local(i)``."""
    kinds = _str_list(t, "layer_types")
    if kinds is not None:
        if len(kinds) != layers:
            raise ConfigError(f"{t.where}: layer_types", f"{len(kinds)} entries",
                              f"one per layer (num_hidden_layers = {layers})")
        return sum(1 for k in kinds if k == "sliding_attention")
    return sum(1 for i in range(layers) if local(i))


def _gemma(t: Table, llama_like, *, version: int) -> dict[str, Any]:
    shape = _base(t, llama_like)
    layers = shape["layers"]
    default_window = 4096
    if version == 2:
        local = lambda i: i % 2 == 0  # noqa: E731  (Gemma2DecoderLayer: not layer_idx % 2)
    else:
        pattern = t.int("sliding_window_pattern", 6, min=1)
        local = lambda i: (i + 1) % pattern != 0  # noqa: E731
    window = _optional_int(t, "sliding_window", default_window)
    count = _window_layers(t, layers, local) if window is not None else 0
    return shape | dict(head_dim=t.int("head_dim", 256, min=1), layer_norms=4,
                        tied_embeddings=t.bool("tie_word_embeddings", True),
                        sliding_window=window if count else None,
                        window_layers=count or None,
                        qk_norm="head" if version == 3 else "none")


#: Gemma3TextConfig's defaults for the keys a released ``text_config`` may leave out
_GEMMA3_TEXT_DEFAULTS = {"vocab_size": 262_208, "max_position_embeddings": 131_072}


def _with_defaults(t: Table, defaults: dict[str, Any]) -> Table:
    return Table(defaults | {k: t.get(k, lambda v: v, "a value") for k in list(t.keys())}, t.where)


def _gemma3_text_config(t: Table) -> Table:
    """The language model's table of a ``gemma3`` (vision + text) config: ``text_config``."""
    def table(v: Any) -> dict[str, Any]:
        if not isinstance(v, dict):
            raise TypeError
        return v

    text = t.get("text_config", table, "a table")
    return Table(_GEMMA3_TEXT_DEFAULTS | text, f"{t.where}: text_config")


def _phi3(t: Table, llama_like) -> dict[str, Any]:
    shape = _base(t, llama_like) | dict(sliding_window=_optional_int(t, "sliding_window"))
    # the 128K models keep their pretraining length at the top level (LongRoPE's scaling table
    # holds none): Phi-3-mini-128k 4,096 of 131,072
    original = _optional_int(t, "original_max_position_embeddings")
    if original is not None and original < shape["max_positions"]:
        shape["seq_len"] = original
    return shape


def _olmo2(t: Table, llama_like) -> dict[str, Any]:
    return _base(t, llama_like) | dict(qk_norm="full")


#: model_type -> reader(table, the Llama-like base reader)
FAMILIES = {
    "qwen3": _qwen3,
    "qwen2_moe": lambda t, base: _qwen_moe(t, base, shared=True),
    "qwen3_moe": lambda t, base: _qwen_moe(t, base, shared=False),
    "deepseek_v2": _deepseek,
    "deepseek_v3": _deepseek,
    "gemma2": lambda t, base: _gemma(t, base, version=2),
    "gemma3_text": lambda t, base: _gemma(_with_defaults(t, _GEMMA3_TEXT_DEFAULTS), base, version=3),
    "gemma3": lambda t, base: _gemma(_gemma3_text_config(t), base, version=3),
    "phi3": _phi3,
    "olmo2": _olmo2,
}
