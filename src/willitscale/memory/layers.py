"""The layers a pipeline stage holds, as the memory model needs them: the largest unit a
gather holds at once and the matmul weights of the stage (arrays over plans x stage columns).

A model whose layers differ (DeepSeek-V3's three dense-first layers before 58 MoE layers) must
not be costed by its mean layer where memory depends on the layers a stage really holds:

* **the largest unit a gather holds at once**: FSDP all-gathers one layer (its unit) before
  computing it; PyTorch's own memory test counts the "max unsharded block" (``test_fully_shard
  _memory.py`` @0334530); DeepSpeed's ZeRO-3 keeps the layer being computed plus its prefetch.
  On a stage that holds a MoE layer the largest unit is that MoE layer; on a stage of dense
  layers only, a dense layer. With expert parallelism a MoE unit holds its routed experts'
  ``1/ep`` share (the experts are sharded over the expert group, the rest over the
  data-parallel group: both are gathered whole on the GPU).
* **the matmul weights of the stage** (what autocast copies to 16 bits and keeps for backward
  under DDP, :mod:`willitscale.memory.buffers`): each dense layer's and each MoE layer's own,
  without their norms and router (kept whole on every tensor-parallel rank and left out as the
  mean layer's ``layer_fixed_params`` was), plus the LM head's ``vocab x hidden / tp`` on the
  column that holds it.

Which layers a column holds comes from :func:`willitscale.workload.stages.stage_dense_layers`
(the first stage holds the first layers). A dense model's layers are all alike, so its unit is
its layer, as before.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.workload.params import (
    layer_fixed_params,
    layer_params_per_tp_rank,
    norm_params,
    routed_expert_params_per_tp_rank,
)
from willitscale.workload.stages import stage_dense_layers

__all__ = ["StageLayers", "stage_layer_params"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StageLayers:
    """Per plan and stage column ``(plans, 3)``: parameters one GPU holds."""

    largest_unit: np.ndarray  #: the largest layer the column holds, unsharded on this GPU
    linear: np.ndarray  #: matmul weights (and biases) of the column's layers and LM head


def _kind_units(model, tp, ep):
    """(dense layer, MoE layer) parameters one GPU gathers for one layer of each kind, and
    their matmul parts, arrays ``(plans, 1)``."""
    dense = np.asarray(layer_params_per_tp_rank(model, tp, kind="dense"), dtype=float)
    moe = np.asarray(layer_params_per_tp_rank(model, tp, kind="moe"), dtype=float)
    routed = np.asarray(routed_expert_params_per_tp_rank(model, tp), dtype=float)
    moe = np.where(ep > 1, moe - routed + routed / ep, moe)
    norms = float(model.layer_norms * norm_params(model))
    router = float(model.hidden * model.moe_experts)
    col = lambda x: np.broadcast_to(x, np.shape(tp))[:, None]  # noqa: E731
    return col(dense), col(moe), col(dense - norms), col(moe - norms - router)


def stage_layer_params(model, tp, ep, layers, head) -> StageLayers:
    """:class:`StageLayers` of ``model`` for plans of ``tp`` and ``ep`` (arrays ``(plans,)``)
    whose stage columns hold ``layers`` layers and ``head`` LM heads (``(plans, 3)``)."""
    t = np.asarray(tp, dtype=float)
    e = np.asarray(ep, dtype=float)
    n = np.asarray(layers, dtype=float)
    head_linear = (model.vocab * model.hidden / t)[:, None] * np.asarray(head, dtype=float)
    if not model.is_moe:
        unit = np.asarray(layer_params_per_tp_rank(model, t), dtype=float)[:, None]
        linear = n * (unit - float(layer_fixed_params(model)))
        return StageLayers(largest_unit=unit + 0.0 * n, linear=linear + head_linear)
    dense_unit, moe_unit, dense_linear, moe_linear = _kind_units(model, t, e)
    dense = stage_dense_layers(model.dense_layers, model.layers, n)
    moe = n - dense
    largest = np.maximum(np.where(dense > 0, dense_unit, 0.0), np.where(moe > 0, moe_unit, 0.0))
    return StageLayers(largest_unit=largest,
                       linear=dense * dense_linear + moe * moe_linear + head_linear)
