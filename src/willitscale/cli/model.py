"""``willitscale model NAME|PATH``: parameters, FLOPs and memory of a transformer.

``willitscale model --list`` (or ``willitscale model list``) shows the built-in catalog.
Heavy imports (numpy, the workload core) happen inside the run function.
"""

from __future__ import annotations

import argparse

# Kept in step with willitscale.memory.state.CONVENTIONS (a test checks); listed here so
# that building the parser does not import numpy.
CONVENTION_NAMES = ("zero-16", "handbook-18", "fp32-16", "fp16-no-master-12", "inference-2")
RECOMPUTE_MODES = ("none", "selective", "full")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not >= 1")
    return value


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser(
        "model",
        help="a transformer's parameters, training FLOPs per token and memory",
        description="How big is this transformer to train? Parameters (total, non-embedding, "
                    "per layer, MoE active), training FLOPs per token with and without activation "
                    "recomputation, training-state memory and activation memory per micro-batch. "
                    "NAME is a catalog model (see --list); PATH a Hugging Face config.json (or its "
                    "folder) or a model TOML file. docs/workload.md.",
        epilog=examples("willitscale model gpt2-xl", "willitscale model --list",
                        "willitscale model llama3-70b --seq-len 8192 --micro-batch 1 "
                        "--recompute selective --tp 8 --sequence-parallel",
                        "willitscale model path/to/config.json --json"),
    )
    p.add_argument("target", nargs="?", metavar="NAME|PATH", help="model name, or 'list'")
    p.add_argument("--list", action="store_true", help="list the built-in models")
    p.add_argument("--seq-len", type=_positive_int, help="tokens per sequence (default: the model's training length)")
    p.add_argument("--micro-batch", type=_positive_int, default=1, help="sequences per micro-batch (default 1)")
    p.add_argument("--recompute", choices=RECOMPUTE_MODES, default="none",
                   help="activation recomputation (default none)")
    p.add_argument("--convention", default="zero-16",
                   help="bytes per parameter of training state: " + ", ".join(CONVENTION_NAMES) + " (default zero-16)")
    p.add_argument("--zero-stage", type=int, choices=(0, 1, 2, 3), default=0, help="ZeRO stage (default 0)")
    p.add_argument("--dp", type=_positive_int, default=1, help="data-parallel ranks ZeRO shards over (default 1)")
    p.add_argument("--tp", type=_positive_int, default=1, help="tensor-parallel degree (default 1)")
    p.add_argument("--sequence-parallel", action="store_true", help="Megatron sequence parallelism (with --tp)")
    p.add_argument("--no-flash-attention", dest="flash_attention", action="store_false",
                   help="standard attention: keep the s x s scores (Korthikanti et al.'s setting)")
    p.add_argument("--dropout", action="store_true", help="training uses dropout (stores masks)")
    p.add_argument("--causal", action="store_true",
                   help="count only the unmasked half of the attention scores (default: full, as Megatron/PaLM)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def run(args) -> int:
    if args.list or args.target == "list":
        return _run_list(args)
    if not args.target:
        from willitscale.errors import ConfigError

        raise ConfigError("willitscale model needs a NAME (a catalog model, e.g. willitscale model "
                          "gpt2-xl) or a config.json PATH; willitscale model --list lists the names")
    from willitscale.estimation.model_summary import summarize_model
    from willitscale.workload.catalog import get_model

    summary = summarize_model(
        get_model(args.target), seq_len=args.seq_len, micro_batch=args.micro_batch,
        recompute=args.recompute, convention=args.convention, zero_stage=args.zero_stage,
        dp=args.dp, tp=args.tp, sequence_parallel=args.sequence_parallel,
        flash_attention=args.flash_attention, dropout=args.dropout, causal=args.causal,
    )
    if args.json:
        from willitscale.cli.output import print_json

        print_json(summary)
    else:
        from willitscale.cli.model_view import print_summary

        print_summary(summary)
    return 0


def _run_list(args) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.units import format_count
    from willitscale.workload.catalog import list_models, model_aliases
    from willitscale.workload.params import param_count

    aliases: dict[str, list[str]] = {}
    for alias, name in model_aliases().items():
        aliases.setdefault(name, []).append(alias)
    rows = []
    for m in list_models():
        p = param_count(m)
        rows.append({
            "name": m.name, "aliases": aliases.get(m.name, []), "layers": m.layers, "hidden": m.hidden,
            "heads": m.heads, "kv_heads": m.kv_heads, "ffn_hidden": m.ffn_hidden, "vocab": m.vocab,
            "seq_len": m.seq_len, "moe_experts": m.moe_experts, "moe_top_k": m.moe_top_k,
            "params_total": p.total, "params_non_embedding": p.non_embedding, "params_active": p.active,
            "source": m.source,
        })
    if args.json:
        print_json(rows)
        return 0
    print_table(
        "Built-in models",
        ["model", "params", "non-emb", "active", "layers", "hidden", "heads/kv"],
        [[r["name"], format_count(r["params_total"]), format_count(r["params_non_embedding"]),
          format_count(r["params_active"]), r["layers"], r["hidden"], f"{r['heads']}/{r['kv_heads']}"]
         for r in rows],
        caption="aliases, FFN, vocabulary, sequence length, sources: willitscale model --list --json",
    )
    return 0
