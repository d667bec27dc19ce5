"""Model shapes from a Hugging Face ``config.json``: GPT-2, Llama, Mistral, Qwen2/2.5, Mixtral
here; Qwen3, Qwen2-MoE, Qwen3-MoE, DeepSeek-V2/V3, Gemma 2/3, Phi-3 and OLMo 2 in
:mod:`.hf_families`.

Only the keys that change a parameter, FLOP or activation count are read; each family's
defaults are those of its ``transformers`` configuration class (e.g. ``tie_word_embeddings``
is true for GPT-2 and false for the Llama family; ``num_key_value_heads`` defaults to the
number of heads). A missing key or an unsupported ``model_type`` is a :class:`ConfigError`
naming the file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from willitscale.config import Table
from willitscale.errors import ConfigError
from willitscale.workload.hf_families import FAMILIES
from willitscale.workload.transformer import Transformer

__all__ = ["load_hf_config", "transformer_from_hf", "HF_MODEL_TYPES"]


def _gpt2(t: Table) -> dict[str, Any]:
    hidden = t.int("n_embd", min=1)
    inner = t.get("n_inner", lambda v: v if v is None else int(v), "an integer or null", None)
    return dict(
        layers=t.int("n_layer", min=1), hidden=hidden, heads=t.int("n_head", min=1),
        ffn_hidden=inner, vocab=t.int("vocab_size", min=1),
        max_positions=t.int("n_positions", min=1), position="learned", norm="layernorm",
        bias=True, gated_mlp=False, tied_embeddings=t.bool("tie_word_embeddings", True),
    )


def _llama_like(t: Table) -> dict[str, Any]:
    heads = t.int("num_attention_heads", min=1)
    max_positions = t.int("max_position_embeddings", min=1)
    head_dim = t.get("head_dim", lambda v: v if v is None else int(v), "an integer or null", None)
    return dict(
        layers=t.int("num_hidden_layers", min=1), hidden=t.int("hidden_size", min=1),
        heads=heads, kv_heads=t.get("num_key_value_heads", lambda v: heads if v is None else int(v),
                                    "an integer", heads),
        head_dim=head_dim, ffn_hidden=t.int("intermediate_size", min=1), gated_mlp=True,
        vocab=t.int("vocab_size", min=1), max_positions=max_positions,
        seq_len=_pretraining_length(t, max_positions),
        position="rope", norm="rmsnorm", bias=False,
        tied_embeddings=t.bool("tie_word_embeddings", False),
    )


def _pretraining_length(t: Table, max_positions: int) -> int:
    """The sequence length a RoPE model was pretrained at: ``rope_scaling``'s
    ``original_max_position_embeddings`` when the config extends the context (Llama 3.1: 8,192
    of 131,072), else ``max_position_embeddings``. A config holds no training length; this is the
    best default it offers, and callers should let the user override it."""
    scaling = t.get("rope_scaling", lambda v: v if v is None or isinstance(v, dict) else int("x"),
                    "a table or null", None)
    original = (scaling or {}).get("original_max_position_embeddings")
    if isinstance(original, int) and 0 < original < max_positions:
        return original
    return max_positions


def _llama(t: Table) -> dict[str, Any]:
    shape = _llama_like(t)
    attention_bias = t.bool("attention_bias", False)
    return shape | dict(qkv_bias=attention_bias, attn_out_bias=attention_bias,
                        mlp_bias=t.bool("mlp_bias", False))


def _window(t: Table) -> int | None:
    return t.get("sliding_window", lambda v: v if v is None else int(v), "an integer or null", None)


def _mistral(t: Table) -> dict[str, Any]:
    return _llama_like(t) | dict(sliding_window=_window(t))


def _qwen2(t: Table) -> dict[str, Any]:
    # Qwen2 puts biases on q, k and v only; its sliding window applies only when enabled.
    window = _window(t) if t.bool("use_sliding_window", False) else None
    return _llama_like(t) | dict(qkv_bias=True, sliding_window=window)


def _mixtral(t: Table) -> dict[str, Any]:
    return _mistral(t) | dict(moe_experts=t.int("num_local_experts", min=1),
                              moe_top_k=t.int("num_experts_per_tok", min=1))


def _family(reader: Callable[[Table, Callable], dict[str, Any]]) -> Callable[[Table], dict[str, Any]]:
    return lambda t: reader(t, _llama_like)


HF_MODEL_TYPES: Mapping[str, Callable[[Table], dict[str, Any]]] = {
    "gpt2": _gpt2,
    "llama": _llama,
    "mistral": _mistral,
    "qwen2": _qwen2,
    "mixtral": _mixtral,
} | {name: _family(reader) for name, reader in FAMILIES.items()}


def transformer_from_hf(config: Mapping[str, Any], name: str, *, where: str = "config.json") -> Transformer:
    """A :class:`Transformer` from the parsed contents of a Hugging Face ``config.json``."""
    table = Table(config, where)
    model_type = table.str("model_type")
    if model_type not in HF_MODEL_TYPES:
        raise ConfigError(f"{where}: model_type", model_type,
                          "one of the supported Hugging Face model types: " + ", ".join(HF_MODEL_TYPES))
    fields = HF_MODEL_TYPES[model_type](table)
    return Transformer(name=name, source=f"Hugging Face config ({where})", **fields)


def load_hf_config(path: str | Path) -> Transformer:
    """A model from a Hugging Face ``config.json`` file, or a folder holding one.

    The model is named after the folder (``.../Llama-2-7b-hf/config.json`` -> ``Llama-2-7b-hf``),
    or after the file's stem when it is not called ``config.json``.
    """
    path = Path(path)
    if path.is_dir():
        path = path / "config.json"
    if not path.is_file():
        raise ConfigError(f"{path}: no such file (expected a Hugging Face config.json or a folder holding one)")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(config, dict):
        raise ConfigError(f"{path}: expected a JSON object of configuration keys")
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return transformer_from_hf(config, name or "model", where=str(path))
