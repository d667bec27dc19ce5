"""The built-in model catalog (``workload/models/*.toml``) and loading a model by name or path.

A catalog file holds one table per model, keyed by its name, with the fields of
:class:`~willitscale.workload.transformer.Transformer`, a ``source`` and optional ``aliases``::

    [llama2-7b]
    aliases = ["llama-2-7b"]
    source = "Touvron et al. 2023 Table 1; huggingface.co/meta-llama/Llama-2-7b-hf config.json"
    layers = 32
    ...

A user's own model is a TOML file in the same format (one table) or a Hugging Face
``config.json``; :func:`get_model` takes either path.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from importlib import resources
from pathlib import Path
from types import MappingProxyType

from willitscale.config import Table, load_toml
from willitscale.errors import ConfigError, UnknownNameError
from willitscale.workload.hf import load_hf_config
from willitscale.workload.hfcache import MODEL_ID, cached_config, hub_cache
from willitscale.workload.transformer import (
    IMPLEMENTATIONS,
    NORMS,
    POSITIONS,
    QK_NORMS,
    Transformer,
)

__all__ = ["get_model", "list_models", "model_aliases", "model_from_table", "load_model_toml"]

# Families in the order `willitscale model --list` shows them; other files follow by name.
_FAMILY_ORDER = ("gpt2", "gpt3", "opt", "bloom", "llama2", "llama3", "mistral", "qwen2")
_OPTIONAL_INTS = ("kv_heads", "head_dim", "ffn_hidden", "seq_len", "sliding_window", "v_head_dim",
                  "q_lora_rank", "kv_lora_rank", "dense_ffn", "window_layers")
_OPTIONAL_BOOLS = ("qkv_bias", "attn_out_bias", "mlp_bias")


def model_from_table(name: str, table: Table) -> tuple[Transformer, tuple[str, ...]]:
    """A :class:`Transformer` and its aliases from one TOML table; unknown keys are errors."""
    fields: dict[str, object] = {
        "layers": table.int("layers", min=1),
        "hidden": table.int("hidden", min=1),
        "heads": table.int("heads", min=1),
        "vocab": table.int("vocab", min=1),
        "max_positions": table.int("max_positions", 2048, min=1),
        "gated_mlp": table.bool("gated_mlp", False),
        "position": table.str("position", "learned", choices=iter(POSITIONS)),
        "norm": table.str("norm", "layernorm", choices=iter(NORMS)),
        "bias": table.bool("bias", True),
        "embedding_norm": table.bool("embedding_norm", False),
        "tied_embeddings": table.bool("tied_embeddings", True),
        "moe_experts": table.int("moe_experts", 0, min=0),
        "moe_top_k": table.int("moe_top_k", 0, min=0),
        "moe_shared_ffn": table.int("moe_shared_ffn", 0, min=0),
        "moe_shared_gate": table.bool("moe_shared_gate", False),
        "dense_layers": table.int("dense_layers", 0, min=0),
        "rope_head_dim": table.int("rope_head_dim", 0, min=0),
        "qk_norm": table.str("qk_norm", "none", choices=iter(QK_NORMS)),
        "layer_norms": table.int("layer_norms", 2, min=1),
        "implementation": table.str("implementation", "fused", choices=iter(IMPLEMENTATIONS)),
        "source": table.str("source"),
    }
    for key in _OPTIONAL_INTS:
        fields[key] = table.int(key, None, min=1)
    for key in _OPTIONAL_BOOLS:
        fields[key] = table.bool(key, None)
    aliases = table.list("aliases", [])
    if not all(isinstance(a, str) for a in aliases):
        raise ConfigError(f"{table.where}: aliases", aliases, "a list of strings")
    table.done()
    return Transformer(name=name, **fields), tuple(aliases)


@functools.cache
def _catalog() -> tuple[Mapping[str, Transformer], Mapping[str, str]]:
    """(name -> model, alias -> name) from the packaged TOML files, in file order."""
    models: dict[str, Transformer] = {}
    aliases: dict[str, str] = {}
    folder = resources.files("willitscale.workload").joinpath("models")
    files = [e for e in folder.iterdir() if e.name.endswith(".toml")]
    rank = {family: i for i, family in enumerate(_FAMILY_ORDER)}
    for entry in sorted(files, key=lambda e: (rank.get(e.name[:-5], len(rank)), e.name)):
        with resources.as_file(entry) as path:
            data = load_toml(path)
        for name, raw in data.items():
            model, names = model_from_table(name, Table(raw, f"{entry.name}: [{name}]"))
            for key in (name, *names):
                if key in models or key in aliases:
                    raise ConfigError(f"model catalog: {key!r} is defined twice ({entry.name})")
            models[name] = model
            aliases.update({alias: name for alias in names})
    return MappingProxyType(models), MappingProxyType(aliases)


def list_models() -> tuple[Transformer, ...]:
    """Every built-in model, in catalog order."""
    return tuple(_catalog()[0].values())


def model_aliases() -> Mapping[str, str]:
    """Alias -> catalog name (``"llama3.1-8b" -> "llama3-8b"``)."""
    return _catalog()[1]


def load_model_toml(path: str | Path) -> Transformer:
    """A user's model from a TOML file holding exactly one model table."""
    path = Path(path)
    data = load_toml(path)
    if len(data) != 1:
        raise ConfigError(f"{path}: expected exactly one model table such as [my-model], found "
                          f"{len(data)} ({', '.join(data) or 'none'})")
    name, raw = next(iter(data.items()))
    return model_from_table(name, Table(raw, f"{path}: [{name}]"))[0]


def _looks_like_path(text: str) -> bool:
    if "/" in text or "\\" in text or text.endswith((".json", ".toml")):
        return True
    try:
        return Path(text).exists()
    except OSError:  # longer than a file name may be: a (mistyped) name, not a path
        return False


def get_model(name_or_path: str | Path | Transformer) -> Transformer:
    """A model by catalog name or alias (case-insensitive), or from a path: a Hugging Face
    ``config.json`` (or the folder holding it) or a model TOML file.

    Unknown names raise :class:`UnknownNameError` with the closest names.
    """
    if isinstance(name_or_path, Transformer):
        return name_or_path
    text = str(name_or_path).strip()
    models, aliases = _catalog()
    key = text.lower()
    if _is_model_file(Path(text).expanduser()):  # a file on disk wins over a same-named alias
        return _load_path(Path(text).expanduser())
    if key in models:
        return models[key]
    if key in aliases:
        return models[aliases[key]]
    if (not isinstance(name_or_path, Path) and MODEL_ID.match(text) and not Path(text).exists()
            and not text.endswith((".json", ".toml"))):  # a missing file is "no such file"
        return _from_hub_cache(text)
    if isinstance(name_or_path, Path) or _looks_like_path(text):
        return _load_path(Path(text).expanduser())
    raise UnknownNameError("model", text, [*models, *aliases])


def _from_hub_cache(model_id: str) -> Transformer:
    """A Hub model id from the local Hugging Face cache, named by its id (no network)."""
    config = cached_config(model_id)
    if config is None:
        raise ConfigError("model", model_id, f"a catalog name, a config.json path, or a Hub id in "
                          f"the local Hugging Face cache ({hub_cache()}), which does not hold "
                          f"it: `huggingface-cli download {model_id} config.json` fetches it")
    return replace(load_hf_config(config), name=model_id)


def _is_model_file(path: Path) -> bool:
    try:
        return path.is_file() or (path.is_dir() and (path / "config.json").is_file())
    except OSError:  # e.g. a name longer than a path may be: it is not a file
        return False


def _load_path(path: Path) -> Transformer:
    if path.suffix == ".toml":
        return load_model_toml(path)

    return load_hf_config(path)
