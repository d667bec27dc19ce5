"""Whether a model can be split the way a plan says: reasons, vectorised over plans.

:func:`structural_reasons` returns, for arrays of plans, the code of the first reason each plan
cannot run (0: none); the planner counts them, and :func:`check_plan` turns the one reason of a
single scenario into a :class:`~willitscale.errors.ConfigError` that names the field. Out of
memory is not structural: it is decided by the estimate (:class:`OutOfMemory`).
"""

from __future__ import annotations

import numpy as np

from willitscale.errors import ConfigError, Infeasible
from willitscale.topology.placement import DEFAULT_ORDER, uneven_detail, uneven_groups
from willitscale.workload.params import tp_divides_shape
from willitscale.workload.stages import model_terms, stage_layers

__all__ = ["REASONS", "OutOfMemory", "structural_reasons", "check_plan"]

#: reason code (index) -> (stable name, what it means); 0 is "runs"
REASONS = (
    ("ok", "runs"),
    ("needs_model_shape", "tensor, pipeline, context and expert parallelism need the model's "
                          "shape (layers, heads): give --model instead of --params"),
    ("tp_not_dividing_heads", "tp must divide the attention heads and the FFN width (and the "
                              "key/value heads, or be a multiple of them)"),
    ("pp_not_dividing_layers", "pp must divide the layers (or layers + 2, with the embedding and "
                               "the head counted as layers)"),
    ("virtual_stages_not_dividing_layers", "the interleaved schedule needs each (middle) "
                                           "stage's layers to split evenly into virtual_stages "
                                           "chunks"),
    ("interleaved_needs_microbatches", "the interleaved schedule needs the micro-batches per "
                                       "step (grad_accum) to be a multiple of pp (Megatron-LM)"),
    ("cp_not_dividing_sequence", "cp needs the sequence length to be a multiple of 2 x cp (each "
                                 "rank takes two chunks for causal load balance)"),
    ("ep_needs_moe", "expert parallelism needs a mixture-of-experts model"),
    ("ep_not_dividing_experts", "ep must divide the number of experts"),
    ("tp_wider_than_node", "tp is wider than a node's GPUs: its all-reduces would cross the "
                           "inter-node network (allow with --allow-tp-across-nodes)"),
    ("moe_tp_needs_sequence_parallel", "a mixture-of-experts model with tp > 1 needs sequence "
                                       "parallelism: each tensor-parallel rank then dispatches "
                                       "its 1/tp of the tokens (Megatron-LM's arguments.py: "
                                       "'When using MoE and tensor parallelism, sequence "
                                       "parallelism must be used')"),
    ("uneven_placement", "a group lands unevenly on the nodes (e.g. 2 + 1 GPUs): the collective "
                         "model needs the same number of members on every node a group spans; "
                         "another --rank-order or degree often places it evenly"),
    ("batch_not_divisible", "the global batch must be a multiple of dp x micro_batch"),
    ("out_of_memory", "the training state and activations exceed the GPU's memory"),
)
CODE = {name: i for i, (name, _) in enumerate(REASONS)}


class OutOfMemory(Infeasible):
    """The plan needs more memory per GPU than the GPU has; carries the breakdown."""

    def __init__(self, message: str, memory=None):
        super().__init__("out_of_memory", message)
        self.memory = memory


def structural_reasons(degrees: dict, terms, model, *, gpus_per_node: int, seq_len: int,
                       allow_tp_across_nodes: bool = True, order: tuple[str, ...] | None = None):
    """The first reason each plan cannot run (an int code per plan, 0 = none).

    ``degrees`` holds arrays ``tp, pp, cp, ep, dp, grad_accum, interleaved (bool),
    virtual_stages`` and optionally ``sequence_parallel`` (bool); ``order`` is the rank order
    (default Megatron-LM's, :data:`willitscale.topology.placement.DEFAULT_ORDER`).
    """

    tp, pp, cp, ep = (np.asarray(degrees[k]) for k in ("tp", "pp", "cp", "ep"))
    accum, v = np.asarray(degrees["grad_accum"]), np.asarray(degrees["virtual_stages"])
    inter = np.asarray(degrees["interleaved"], dtype=bool)
    layers, layers_ok = stage_layers(terms.layers, pp)
    mp = (tp > 1) | (pp > 1) | (cp > 1) | (ep > 1)
    if model is not None:
        tp_ok = np.asarray(tp_divides_shape(model, tp), dtype=bool)
    else:
        tp_ok = np.ones(np.shape(tp), dtype=bool)
    checks = [
        ("needs_model_shape", mp & (not terms.has_shape)),
        ("tp_not_dividing_heads", ~tp_ok),
        ("pp_not_dividing_layers", ~layers_ok | (pp > terms.layers)),
        ("virtual_stages_not_dividing_layers",
         inter & (np.mod(layers[..., 1], np.maximum(v, 1)) != 0)),
        ("interleaved_needs_microbatches", inter & (np.mod(accum, pp) != 0)),
        ("cp_not_dividing_sequence", (cp > 1) & (np.mod(seq_len, 2 * cp) != 0)),
        ("ep_needs_moe", (ep > 1) & (not terms.moe)),
        ("ep_not_dividing_experts", (ep > 1) & terms.moe & (np.mod(max(terms.experts, 1), ep) != 0)),
        ("tp_wider_than_node", (tp > gpus_per_node) & (not allow_tp_across_nodes)),
        ("moe_tp_needs_sequence_parallel", (tp > 1) & terms.moe & ~np.asarray(
            degrees.get("sequence_parallel", False), dtype=bool)),
        ("uneven_placement", uneven_groups(degrees, gpus_per_node, order or DEFAULT_ORDER) != ""),
    ]
    code = np.zeros(np.broadcast(tp, pp, cp, ep).shape, dtype=np.int64)
    for name, bad in reversed(checks):  # the first failing check wins
        code = np.where(bad, CODE[name], code)
    return code


def check_plan(scenario) -> None:
    """Raise a :class:`ConfigError` if ``scenario``'s model cannot be split as its plan says."""

    plan = scenario.plan
    if scenario.measured.step_time_one_gpu is not None and not plan.is_data_parallel:
        raise ConfigError("a measured single-GPU step time (--compute-time-per-step) replaces "
                          "the compute of a data-parallel step; it cannot be split over tp, pp, "
                          "cp, ep or ZeRO shards")
    terms = model_terms(scenario)
    degrees = {"tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep, "dp": plan.dp,
               "grad_accum": plan.grad_accum, "interleaved": plan.pp_schedule == "interleaved",
               "virtual_stages": plan.virtual_stages, "sequence_parallel": plan.sequence_parallel}
    g, order = scenario.cluster.node.gpus_per_node, scenario.options.rank_order
    code = int(structural_reasons(degrees, terms, scenario.model, gpus_per_node=g,
                                  seq_len=scenario.seq_len,
                                  allow_tp_across_nodes=scenario.options.allow_tp_across_nodes,
                                  order=order))
    if code == CODE["uneven_placement"]:
        raise ConfigError(_uneven_text(plan, degrees, g, order))
    if code:
        name, why = REASONS[code]
        raise ConfigError(f"{_plan_text(plan)} cannot run {_model_text(scenario, terms)}: {why}"
                          f" [{name}]")


def _uneven_text(plan, degrees: dict, gpus_per_node: int, order) -> str:
    """Which group lands unevenly, where, and a rank order that places every group evenly."""
    from itertools import permutations


    arrays = {k: np.array([degrees[k]]) for k in ("tp", "cp", "ep", "dp", "pp")}
    kind = str(uneven_groups(arrays, gpus_per_node, order)[0])
    names = {"tp": "tensor-parallel", "cp": "context-parallel", "ep": "expert-parallel",
             "dp": "data-parallel (gradient)", "edp": "expert data-parallel", "pp": "pipeline"}
    text = (f"tp={plan.tp}, pp={plan.pp}, dp={plan.dp}" + (f", cp={plan.cp}" if plan.cp > 1 else "")
            + (f", ep={plan.ep}" if plan.ep > 1 else "") + f" on nodes of {gpus_per_node} GPUs "
            f"(rank order {'-'.join(order)}): a {names[kind]} group lands unevenly: "
            f"{uneven_detail(kind, arrays, gpus_per_node, order)}. The collective model needs "
            "the same number of a group's members on every node it spans [uneven_placement]")
    fits = [o for o in permutations(order) if o[0] == order[0]
            and uneven_groups(arrays, gpus_per_node, o)[0] == ""]
    if fits:
        text += f"; --rank-order {'-'.join(fits[0])} places every group evenly"
    return text


def _plan_text(plan) -> str:
    parts = [f"{k}={getattr(plan, k)}" for k in ("tp", "pp", "cp", "ep") if getattr(plan, k) > 1]
    if plan.pp_schedule == "interleaved":
        parts.append(f"virtual_stages={plan.virtual_stages}, grad_accum={plan.grad_accum}")
    return "the plan (" + (", ".join(parts) or "data parallel") + ")"


def _model_text(scenario, terms) -> str:
    model = scenario.model
    if model is None:
        return f"a bare parameter count ({scenario.params:g})"
    extra = f", {model.moe_experts} experts" if model.is_moe else ""
    return (f"{model.name} ({model.layers} layers, {model.heads} heads, {model.kv_heads} kv heads, "
            f"ffn {model.ffn_hidden}{extra}) at seq_len {scenario.seq_len}")
