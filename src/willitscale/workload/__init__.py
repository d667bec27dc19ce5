"""Workload: a transformer's shape, and what it costs in parameters and FLOPs.

Modules: :mod:`.transformer` (the shape), :mod:`.params` (exact parameter counts),
:mod:`.flops` (training FLOPs per token), :mod:`.approximations` (6PD and friends),
:mod:`.catalog` and :mod:`.hf` (models by name, TOML or Hugging Face config),
:mod:`.stages` (a model split into pipeline stages). Names load lazily: importing this
package does not import numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS: dict[str, str] = {
    "Transformer": "transformer",
    "ParamCount": "params",
    "param_count": "params",
    "layer_params_per_tp_rank": "params",
    "embedding_params_per_tp_rank": "params",
    "head_params_per_tp_rank": "params",
    "tp_divides_shape": "params",
    "LayerFlops": "flops",
    "TrainingFlops": "flops",
    "RECOMPUTE": "flops",
    "layer_forward_flops": "flops",
    "training_flops": "flops",
    "keys_per_query": "flops",
    "kaplan_6pd": "approximations",
    "recompute_8pd": "approximations",
    "narayanan_flops": "approximations",
    "korthikanti_model_flops": "approximations",
    "palm_flops_per_token": "approximations",
    "handbook_tflop_per_gpu": "approximations",
    "approximate_flops_per_token": "approximations",
    "get_model": "catalog",
    "list_models": "catalog",
    "model_aliases": "catalog",
    "load_hf_config": "hf",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'willitscale.workload' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"willitscale.workload.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
