"""The readable (rich table) view of ``willitscale model``."""

from __future__ import annotations

from willitscale.cli.output import console, print_table
from willitscale.units import format_count, format_flops, format_size


def _count(n) -> str:
    return f"{round(n):,}  ({format_count(n)})"


def _shape_extras(m) -> str:
    """The header's words for MLA, shared experts, dense-first layers, QK-norm and windows."""
    parts = []
    if m.is_moe and m.moe_shared_ffn:
        parts.append(f"shared expert ffn {m.moe_shared_ffn}")
    if m.dense_layers:
        parts.append(f"{m.dense_layers} dense layers of ffn {m.dense_ffn}")
    if m.is_mla:
        q = f"q_lora {m.q_lora_rank}, " if m.q_lora_rank else ""
        parts.append(f"MLA ({q}kv_lora {m.kv_lora_rank}, head {m.head_dim} qk / {m.v_head_dim} v)")
    elif m.head_dim * m.heads != m.hidden:
        parts.append(f"head_dim {m.head_dim}")
    if m.qk_norm != "none":
        parts.append(f"QK-norm ({m.qk_norm})")
    if m.sliding_window is not None:
        parts.append(f"window {m.sliding_window} on {m.window_layer_count} of {m.layers} layers")
    return "".join(", " + p for p in parts)


def print_summary(summary) -> None:
    """Four tables: parameters, FLOPs, training state, activations."""
    from rich.markup import escape

    m, p, f, a = summary.model, summary.params, summary.flops, summary.activations
    out = console()
    kv = f", {m.kv_heads} kv heads" if m.kv_heads != m.heads else ""
    moe = f", MoE {m.moe_experts} experts top-{m.moe_top_k}" if m.is_moe else ""
    out.print(f"[bold]{escape(m.name)}[/bold]: {m.layers} layers, hidden {m.hidden}, {m.heads} heads{kv}, "
              f"ffn {m.ffn_hidden}{' gated' if m.gated_mlp else ''}, vocab {m.vocab}{moe}"
              f"{escape(_shape_extras(m))}")
    out.print(f"[dim]source: {escape(str(m.source))}[/dim]")

    mean = "mean " if m.dense_layers else ""
    rows = [["total", _count(p.total)], ["non-embedding", _count(p.non_embedding)],
            ["embedding (token + position)", _count(p.embedding)], [mean + "per layer", _count(p.per_layer)],
            ["LM head (untied)", _count(p.lm_head)]]
    if m.is_moe:
        rows += [["active per token", _count(p.active)],
                 ["active " + mean + "per layer", _count(p.per_layer_active)]]
    if summary.tp > 1:
        rows.append([f"per GPU (tp={summary.tp})", _count(round(summary.params_per_gpu))])
    print_table("Parameters", ["part", "count"], rows)

    attention = "causal half" if f.causal else "full s x s"
    rows = [["forward", format_flops(f.forward_per_token)],
            ["training, model FLOPs (3x forward)", format_flops(f.model_per_token)]]
    rows += [[f"training, executed, recompute {mode}", format_flops(v)]
             for mode, v in summary.hardware_flops_per_token.items()]
    rows += [["one layer, training (model)", format_flops(f.layer_model_per_token)],
             ["LM head, training", format_flops(f.lm_head_per_token)]]
    from willitscale.workload.approximations import APPROXIMATION_LABELS

    rows += [[f"≈ {APPROXIMATION_LABELS[key]}", format_flops(v)] for key, v in summary.approximations.items()]
    print_table(f"FLOPs per token (seq_len {f.seq_len}, attention counted {attention}, "
                f"flash attention {'on' if f.flash_attention else 'off'})", ["what", "FLOPs"], rows,
                caption=f"per sequence: {format_flops(f.model_per_sequence)} model, "
                        f"{format_flops(f.hardware_per_sequence)} executed with recompute={f.recompute}")

    st, sg = summary.state_total, summary.state_per_gpu
    rows = [[part, format_size(getattr(st, part)), format_size(getattr(sg, part))]
            for part in ("weights", "gradients", "master", "optimizer")]
    rows.append(["total", format_size(st.total), format_size(sg.total)])
    print_table(f"Training state ({st.convention}: {st.bytes_per_param:g} bytes/param)",
                ["part", "whole model", f"per GPU (tp={summary.tp}, ZeRO-{sg.zero_stage}, dp={sg.dp})"], rows)

    rows = [["norms", format_size(a.layer_norms)], ["attention", format_size(a.layer_attention)],
            ["attention scores", format_size(a.layer_attention_scores)], ["MLP", format_size(a.layer_mlp)],
            ["layer, no recompute", format_size(a.layer_no_recompute)],
            [f"layer kept (recompute {a.recompute})", format_size(a.per_layer)],
            ["recompute transient", format_size(a.recompute_transient)],
            ["embedding + head", format_size(a.embedding + a.head)],
            [f"total, {m.layers} layers", format_size(a.total)]]
    sp = ", sequence parallel" if a.sequence_parallel else ""
    print_table(f"Activations per micro-batch ({summary.micro_batch} x {f.seq_len} tokens, tp={summary.tp}{sp}, "
                f"dropout {'on' if a.dropout else 'off'})", ["part", "bytes"], rows)
