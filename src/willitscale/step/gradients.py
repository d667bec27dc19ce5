"""When each gradient of a layer becomes ready during backward: the input of the DDP bucket
schedule (:mod:`.data`).

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
count in proportion to their sizes (biases go with their matrix), and the groups of a layer sum
to the layer's parameters exactly (tests/unit/test_plan_buckets.py checks it).
"""

from __future__ import annotations

from willitscale.workload.flops import TrainingFlops
from willitscale.workload.params import (
    attention_params,
    mlp_block_params,
    norm_params,
    routed_expert_params,
    router_params,
)
from willitscale.workload.transformer import Transformer

__all__ = ["layer_gradient_groups"]


def layer_gradient_groups(model: Transformer, flops: TrainingFlops) -> list[tuple[str, float, float]]:
    """(name, params, backward work preceding readiness) for one layer, in ready order."""
    layer = flops.layer_forward
    attention = attention_params(model)
    out_share = model.o_dim * model.hidden / attention
    mlp_all = mlp_block_params(model)
    matrices = 3 if model.gated_mlp else 2
    norm = model.layer_norms * norm_params(model) / 2  # each of the two norm groups
    groups = [("recompute", 0.0, float(flops.layer_recompute_per_token))]
    # routed experts ("mlp.", what expert parallelism splits); shared experts and dense-first
    # layers' MLPs ("dense_mlp.", whole on every expert-parallel rank), work in FLOP proportion
    routed = float(routed_expert_params(model)) if model.is_moe else float(mlp_all)
    routed_work = (2.0 * matrices * model.hidden * model.ffn_hidden * model.moe_top_k
                   * model.moe_layers / model.layers) if model.is_moe else float(layer.mlp)
    for prefix, n, work in (("mlp.", routed, routed_work),
                            ("dense_mlp.", mlp_all - routed, float(layer.mlp) - routed_work)):
        if n <= 0 and prefix != "mlp.":
            continue
        for name in ("down", "up", "gate")[:matrices]:  # one tensor each in PyTorch
            groups.append((prefix + name, n / matrices, 2.0 * work / matrices))
    if model.moe_experts:
        groups.append(("router", float(router_params(model)), 2.0 * layer.router))
    groups.append(("norm2", float(norm), 0.0))
    groups.append(("attn.out", attention * out_share, 2.0 * layer.attention_output))
    core = float(flops.layer_backward_per_token) - 2.0 * float(layer.total) - float(
        flops.layer_recompute_per_token) + 2.0 * float(layer.attention_core)
    groups.append(("attn.core", 0.0, core))
    groups.append(("attn.qkv", attention * (1 - out_share), 2.0 * layer.qkv))
    groups.append(("norm1", float(norm), 0.0))
    return groups
