"""When each gradient becomes ready during backward: the input of the DDP bucket schedule.

Backward runs the model in reverse: the LM head first, then the layers from last to first, then
the embeddings. Inside a pre-norm layer (``x + attn(norm1(x))``, then ``+ mlp(norm2(.))``) the
gradients appear in this order: MLP down projection, MLP up (and gate) projections, the MoE
router, norm2, attention output projection, then (after the attention core's backward, which
has no parameters) the q/k/v projection, norm1. With full recomputation, each layer's forward
is rerun at the start of its backward, before any of its gradients.

Each parameter group gets the backward *work* that precedes it, in FLOPs per token: a matmul's
backward is twice its forward (input and weight gradients), and the workload module's FLOP
counts give the forward of each part. A tied token embedding receives gradient from the LM head
first and from the embedding lookup last, so it is ready only at the very end of backward: with
a large vocabulary that last bucket is what stays exposed.

Parameter counts come from :mod:`willitscale.workload.params`; the matrices of a block share its
count in proportion to their sizes (biases go with their matrix), and the sum over all groups
equals the model's total exactly (a unit test checks it).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.workload.flops import TrainingFlops
from willitscale.workload.params import attention_params, mlp_params, norm_params, param_count
from willitscale.workload.transformer import Transformer

__all__ = ["GradientLayout", "gradient_layout"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientLayout:
    """Parameter groups in the order their gradients become ready in backward.

    ``params[i]`` elements become ready once the fraction ``ready_fraction[i]`` of backward's
    executed work has run. ``names`` label the groups for reports.
    """

    names: tuple[str, ...]
    params: np.ndarray
    ready_fraction: np.ndarray

    @property
    def total_params(self) -> float:
        return float(self.params.sum())


def _layer_groups(model: Transformer, flops: TrainingFlops):
    """(name, params, backward work preceding readiness) for one layer, in ready order."""
    layer = flops.layer_forward
    h, q, kv = model.hidden, model.q_dim, model.kv_dim
    attention = attention_params(model)
    out_share = q * h / (h * (q + 2 * kv) + q * h)
    mlp_all = model.mlp_experts * mlp_params(model)
    matrices = 3 if model.gated_mlp else 2
    norm = norm_params(model)
    groups = [("recompute", 0.0, float(flops.layer_recompute_per_token))]
    for name in ("mlp.down", "mlp.up", "mlp.gate")[:matrices]:  # one tensor each in PyTorch
        groups.append((name, mlp_all / matrices, 2.0 * layer.mlp / matrices))
    if model.moe_experts:
        groups.append(("router", float(h * model.moe_experts), 2.0 * layer.router))
    groups.append(("norm2", float(norm), 0.0))
    groups.append(("attn.out", attention * out_share, 2.0 * layer.attention_output))
    core = float(flops.layer_backward_per_token) - 2.0 * float(layer.total) - float(
        flops.layer_recompute_per_token) + 2.0 * float(layer.attention_core)
    groups.append(("attn.core", 0.0, core))
    groups.append(("attn.qkv", attention * (1 - out_share), 2.0 * layer.qkv))
    groups.append(("norm1", float(norm), 0.0))
    return groups


def gradient_layout(model: Transformer, flops: TrainingFlops) -> GradientLayout:
    """The model's parameter groups in ready order with their ready fractions of backward.

    ``flops`` is :func:`willitscale.workload.flops.training_flops` for the same model, sequence
    length and recomputation.
    """
    counts = param_count(model)
    names: list[str] = []
    params: list[float] = []
    work: list[float] = []

    def add(name: str, n: float, w: float) -> None:
        names.append(name)
        params.append(float(n))
        work.append(float(w))

    add("lm_head" if counts.lm_head else "lm_head (tied: no gradient yet)",
        counts.lm_head, 2.0 * flops.lm_head_forward_per_token)
    add("final_norm", counts.final_norm, 0.0)
    for index in reversed(range(model.layers)):
        for name, n, w in _layer_groups(model, flops):
            add(f"layer{index}.{name}", n, w)
    add("position_embedding", counts.position_embedding, 0.0)
    add("embedding_norm", counts.embedding_norm, 0.0)
    add("token_embedding", counts.token_embedding, 0.0)
    done = np.cumsum(work)
    fractions = done / done[-1] if done[-1] > 0 else np.ones_like(done)
    keep = np.asarray(params) > 0
    return GradientLayout(
        names=tuple(n for n, k in zip(names, keep) if k),
        params=np.asarray(params)[keep],
        ready_fraction=fractions[keep],
    )
