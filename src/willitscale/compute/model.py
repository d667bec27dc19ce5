"""The per-op compute model over many plans at once: :func:`layer_spec`, :func:`op_costs`.

Plans of one scenario differ in a few numbers that change an operation's shape: micro-batch,
tensor, context and expert parallel degrees and sequence parallelism. :func:`op_costs` times
every operation (:mod:`willitscale.compute.layer`) once per distinct combination of them (a
planner batch of 100k plans holds a few hundred) and indexes the results back to the plans, so
the per-shape curves cost the planner almost nothing per plan.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np

from willitscale.compute.curves import gpu_curves
from willitscale.compute.layer import (
    KINDS,
    LayerSpec,
    embedding_ops,
    head_ops,
    layer_ops,
    rerun_ops,
)
from willitscale.compute.sustained import sustained_curves, sustained_factor
from willitscale.workload.flops import RECOMPUTE, mean_keys_per_query

__all__ = ["OpCosts", "layer_spec", "op_costs", "spec_for_model"]

#: the q/k/v projection GEMMs (MLA: its down and up projections) whose weight gradients TP's
#: backward all-reduce hides behind
_PROJECTIONS = ("QKV", "Q", "Q down", "Q up", "KV down", "KV up")
#: GPUs whose tensor cores read FP8 operands column-wise (no transposed copy): Blackwell
_NO_FP8_TRANSPOSE = ("b200",)


def layer_spec(scenario) -> LayerSpec | None:
    """The scenario's :class:`LayerSpec`, or None when the per-op model does not apply (no
    model shape, or a GPU without curves)."""
    model = scenario.model
    gpu = scenario.cluster.gpu
    curves = gpu_curves(gpu, scenario.calibration)
    if model is None or curves is None or scenario.dtype not in curves.gemm:
        return None
    factor = curves.sustained if curves.sustained is not None else sustained_factor(curves.architecture)
    curves = sustained_curves(curves, factor)
    options = scenario.compute
    kernel = curves.attention_kernel if options.attention_kernel == "auto" else options.attention_kernel
    s = scenario.seq_len
    documents = options.document_length
    return LayerSpec(
        hidden=model.hidden, q_dim=model.q_dim, kv_dim=model.kv_dim, heads=model.heads,
        kv_heads=model.kv_heads, head_dim=model.head_dim, ffn=model.ffn_hidden,
        gated=model.gated_mlp, rms=model.norm == "rmsnorm", rope=model.position == "rope",
        dropout=model.bias, experts=model.moe_experts, top_k=model.moe_top_k, vocab=model.vocab,
        seq_len=s, keys_causal=float(mean_keys_per_query(model, s, causal=True,
                                                          document_length=documents)),
        document_length=documents if documents is not None and documents < s else None,
        keys_full=float(mean_keys_per_query(model, s)), dtype=scenario.dtype,
        fusion=options.fusion, fp8_recipe=options.fp8_recipe,
        fp8_transpose=gpu.name not in _NO_FP8_TRANSPOSE, flash=scenario.options.flash_attention,
        kernel=kernel, curves=curves, peak=gpu.peak(scenario.dtype),
        attention_peak=gpu.peak("bf16") if "bf16" in gpu.peak_flops else gpu.peak(scenario.dtype),
        **_extended_shape(model))


def spec_for_model(spec: LayerSpec, model) -> LayerSpec:
    """``spec`` with another layer shape of the same model (a dense-first or MoE layer of
    :func:`willitscale.workload.stages.layer_kinds`: the MLP and its extensions differ)."""
    return replace(spec, ffn=model.ffn_hidden, experts=model.moe_experts, top_k=model.moe_top_k,
                   **_extended_shape(model))


def _extended_shape(model) -> dict:
    """The LayerSpec fields of MLA, shared experts, dense-first layers, QK-norm and sandwich norms."""
    return dict(v_head_dim=model.v_head_dim, q_lora=model.q_lora_rank or 0,
                kv_lora=model.kv_lora_rank or 0, rope_head_dim=model.rope_head_dim,
                shared_ffn=model.moe_shared_ffn, shared_gate=model.moe_shared_gate,
                dense_ffn=model.dense_ffn,
                moe_share=model.moe_layers / model.layers if model.is_moe else 1.0,
                qk_norm=model.qk_norm, norms=model.layer_norms)


@dataclass(frozen=True, slots=True, kw_only=True)
class OpCosts:
    """Seconds per micro-batch on one GPU, per plan (arrays ``(plans,)``); ``*_kinds`` split
    the same by :data:`~willitscale.compute.layer.KINDS`."""

    layer_fwd: np.ndarray
    layer_bwd: np.ndarray  #: without recomputation
    layer_recompute: np.ndarray  #: the recomputation the plan's mode reruns
    head_fwd: np.ndarray
    head_bwd: np.ndarray
    emb_fwd: np.ndarray
    emb_bwd: np.ndarray
    wgrad_qkv: np.ndarray  #: the QKV weight-gradient GEMM (what TP's backward all-reduce hides behind)
    wgrad_fc1: np.ndarray  #: the first MLP GEMM's weight gradient
    wgrad_head: np.ndarray
    attention_fwd: np.ndarray  #: one layer's attention core forward (what ring attention hides behind)
    kinds: dict = field(default_factory=dict)  #: part -> kind -> array (single-plan reports)
    ops: tuple = ()  #: the operations of the first plan, for reports


def _sum(ops, attr):
    return sum(np.asarray(getattr(o, attr), dtype=float) for o in ops)


def _by_kind(ops, attr: str) -> dict[str, np.ndarray]:
    fixed = attr + "_fixed"
    out = {k: sum((np.asarray(getattr(o, attr)) - np.asarray(getattr(o, fixed))
                   for o in ops if o.kind == k), np.zeros(1)) for k in KINDS if k != "overhead"}
    out["overhead"] = _sum(ops, fixed)
    return out


def _recompute(ops, attr: str = "fwd"):
    """Per mode of :data:`~willitscale.workload.flops.RECOMPUTE`: the forward time rerun."""
    rows = []
    for mode in RECOMPUTE:
        names = rerun_ops(mode)
        chosen = ops if names is None else [o for o in ops if o.name in names]
        rows.append(_sum(chosen, attr) if chosen else np.zeros_like(np.asarray(ops[0].fwd, dtype=float)))
    return np.stack(np.broadcast_arrays(*rows))


def _named(ops, name: str, attr: str):
    found = [o for o in ops if o.name == name]
    return np.asarray(getattr(found[0], attr), dtype=float) if found else 0.0


def op_costs(spec: LayerSpec, batch, *, detail: bool = False) -> OpCosts:
    """Per-op costs of every plan of ``batch`` (a :class:`~willitscale.scenario.batch.PlanBatch`)."""
    # FP8 weight casts are shared by an optimizer step's micro-batches
    accum = batch.grad_accum if spec.dtype == "fp8" else np.ones_like(batch.tp)
    cols = [np.asarray(c, dtype=np.int64) for c in (batch.micro_batch, batch.tp, batch.cp,
                                                     batch.sequence_parallel, batch.ep, accum)]
    first, inv = _distinct(cols)
    mb, tp, cp, sp, ep, m = (c[first].astype(float) for c in cols)
    tokens = mb * spec.seq_len / cp
    layer = layer_ops(spec, tokens=tokens, tp=tp, cp=cp, sequence_parallel=sp.astype(bool), ep=ep,
                      micro_batch=mb, micro_batches=m)
    head = head_ops(spec, tokens=tokens, tp=tp, sequence_parallel=sp.astype(bool))
    emb = embedding_ops(spec, tokens=tokens, tp=tp, sequence_parallel=sp.astype(bool))
    u = len(first)
    b = lambda x: np.broadcast_to(np.asarray(x, dtype=float), (u,))[inv]  # noqa: E731
    rec = np.broadcast_to(_recompute(layer), (len(RECOMPUTE), u))[:, inv]
    mode = np.asarray(batch.recompute)
    kinds = {}
    if detail:
        rec_kinds = {k: _recompute_kind(layer, k)[:, inv] for k in KINDS}
        kinds = {"layer_fwd": {k: b(v) for k, v in _by_kind(layer, "fwd").items()},
                 "layer_bwd": {k: b(v) for k, v in _by_kind(layer, "bwd").items()},
                 "layer_recompute": {k: v[mode, np.arange(len(mode))] for k, v in rec_kinds.items()},
                 "head_fwd": {k: b(v) for k, v in _by_kind(head, "fwd").items()},
                 "head_bwd": {k: b(v) for k, v in _by_kind(head, "bwd").items()},
                 "emb_fwd": {k: b(v) for k, v in _by_kind(emb, "fwd").items()},
                 "emb_bwd": {k: b(v) for k, v in _by_kind(emb, "bwd").items()}}
    return OpCosts(
        layer_fwd=b(_sum(layer, "fwd")), layer_bwd=b(_sum(layer, "bwd")),
        layer_recompute=rec[mode, np.arange(len(mode))], head_fwd=b(_sum(head, "fwd")),
        head_bwd=b(_sum(head, "bwd")), emb_fwd=b(_sum(emb, "fwd")), emb_bwd=b(_sum(emb, "bwd")),
        wgrad_qkv=b(sum(_named(layer, n, "wgrad") for n in _PROJECTIONS)),
        wgrad_fc1=b(_named(layer, "MLP up", "wgrad")),
        wgrad_head=b(_named(head, "LM head", "wgrad")),
        attention_fwd=b(_named(layer, "attention core", "fwd")), kinds=kinds,
        ops=tuple(layer + head + emb) if detail else ())


def _distinct(cols):
    """``(index of each distinct row's first plan, each plan's row)`` of the columns read as
    rows: one mixed-radix integer key per plan (1-D ``np.unique`` is far faster than
    ``axis=0``)."""
    key = np.zeros_like(cols[0])
    for c in cols:
        key = key * (int(c.max(initial=0)) + 1) + c
    _, first, inv = np.unique(key, return_index=True, return_inverse=True)
    return first, inv.reshape(-1)


def _recompute_kind(ops, kind: str):
    """Recompute time per mode, of one kind (overhead: the kernels' fixed costs)."""
    if kind == "overhead":
        return _recompute(ops, "fwd_fixed")
    parts = [o for o in ops if o.kind == kind]
    rows = []
    for mode in RECOMPUTE:
        names = rerun_ops(mode)
        chosen = parts if names is None else [o for o in parts if o.name in names]
        rows.append(sum((np.asarray(o.fwd) - np.asarray(o.fwd_fixed) for o in chosen),
                        np.zeros_like(np.asarray(ops[0].fwd, dtype=float))))
    return np.stack(np.broadcast_arrays(*rows))
