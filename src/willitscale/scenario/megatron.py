"""Megatron-LM's command line, both ways: its arguments as scenario settings, a plan as arguments.

The flags are Megatron-LM's (``megatron/training/arguments.py``, NVIDIA/Megatron-LM at commit
307dcf37f03d44da131ba21999278abe4112d2ad): ``--tensor-model-parallel-size``,
``--pipeline-model-parallel-size``, ``--context-parallel-size``, ``--expert-model-parallel-size``,
``--num-layers-per-virtual-pipeline-stage``, ``--micro-batch-size``, ``--global-batch-size``,
``--seq-length``, ``--sequence-parallel``, ``--recompute-granularity full|selective`` (and the
older ``--recompute-activations``, selective), ``--use-distributed-optimizer`` (optimizer state
sharded over data parallelism: ZeRO-1 here), ``--bf16``/``--fp16``; the model shape flags
``--num-layers``, ``--hidden-size``, ``--num-attention-heads``, ``--ffn-hidden-size``,
``--num-query-groups``, ``--max-position-embeddings`` name the catalog model with that shape
(none, or several: give ``--model``).
Data parallelism is what the cluster leaves (Megatron-LM derives it the same way); the cluster
comes from flags. A file holding the command (a launch script) is read from its first ``--``
flag; shell line continuations are joined; other flags are ignored.
"""

from __future__ import annotations

import shlex
from typing import Any

from willitscale.errors import ConfigError

__all__ = ["is_megatron", "megatron_settings", "megatron_args"]

_INT = {"--tensor-model-parallel-size": "tp", "--pipeline-model-parallel-size": "pp",
        "--context-parallel-size": "cp", "--expert-model-parallel-size": "ep",
        "--micro-batch-size": "micro_batch", "--global-batch-size": "global_batch",
        "--seq-length": "seq_len"}
_SHAPE = {"--num-layers": "layers", "--hidden-size": "hidden", "--num-attention-heads": "heads",
          "--ffn-hidden-size": "ffn_hidden", "--num-query-groups": "kv_heads",
          "--max-position-embeddings": "max_positions"}
_FLAGS = ("--sequence-parallel", "--use-distributed-optimizer", "--bf16", "--fp16",
          "--recompute-activations", "--group-query-attention")


def is_megatron(text: str) -> bool:
    """Text that holds a Megatron-LM command line (its parallel or batch flags)."""
    return any(flag in text for flag in ("--tensor-model-parallel-size", "--micro-batch-size",
                                         "--pipeline-model-parallel-size"))


def _arguments(text: str, file: str) -> dict[str, str | bool]:
    try:
        words = shlex.split(text.replace("\\\n", " "), comments=True)
    except ValueError as exc:
        raise ConfigError(f"{file}: the command line does not parse as shell words ({exc})") from None
    out: dict[str, str | bool] = {}
    i = next((k for k, w in enumerate(words) if w.startswith("--")), len(words))
    while i < len(words):
        word = words[i]
        if not word.startswith("--"):
            i += 1
            continue
        name, eq, value = word.partition("=")
        if eq:
            out[name] = value
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            out[name], i = words[i + 1], i + 1
        else:
            out[name] = True
        i += 1
    return out


def _number(args: dict, flag: str, file: str) -> int:
    value = args[flag]
    try:
        return int(str(value))
    except ValueError:
        raise ConfigError(f"{file}: {flag}", value, "an integer (a shell variable cannot be "
                                                    "read here: put its value)") from None


def megatron_settings(text: str, file: str) -> dict[str, Any]:
    """Scenario settings (see :mod:`willitscale.scenario.settings`) of a Megatron-LM command."""
    args = _arguments(text, file)
    out: dict[str, Any] = {key: _number(args, flag, file) for flag, key in _INT.items() if flag in args}
    shape = {key: _number(args, flag, file) for flag, key in _SHAPE.items() if flag in args}
    out["sequence_parallel"] = bool(args.get("--sequence-parallel"))
    out["zero"] = 1 if args.get("--use-distributed-optimizer") else 0
    out["dtype"] = "bf16" if args.get("--bf16") else "fp16" if args.get("--fp16") else "fp32"
    granularity = args.get("--recompute-granularity")
    if granularity not in (None, "full", "selective"):
        raise ConfigError(f"{file}: --recompute-granularity", granularity, "full or selective")
    out["recompute"] = granularity or ("selective" if args.get("--recompute-activations") else "none")
    model = _catalog_model(shape)
    if model is not None:
        out["model"] = model.name
    if "--num-layers-per-virtual-pipeline-stage" in args:
        per_stage = _number(args, "--num-layers-per-virtual-pipeline-stage", file)
        layers, pp = shape.get("layers") or (model.layers if model else 0), out.get("pp", 1)
        stages, rest = divmod(layers, max(pp * per_stage, 1))
        if not layers or rest or stages < 2:
            raise ConfigError(f"{file}: --num-layers-per-virtual-pipeline-stage", per_stage,
                              f"a divisor of --num-layers {layers or '?'} / pp {pp} giving >= 2 "
                              "stages per rank")
        out["pp_schedule"], out["virtual_stages"] = "interleaved", stages
    return out


def _catalog_model(shape: dict[str, int]):
    """The one catalog model whose shape has every given field, or None."""
    from willitscale.workload import list_models

    if not {"layers", "hidden", "heads"} <= set(shape):
        return None
    found = [m for m in list_models() if all(getattr(m, k) == v for k, v in shape.items())]
    return found[0] if len(found) == 1 else None


def _check_exportable(model) -> None:
    """ConfigError for shape features these flags do not write yet (they would describe another
    model): multi-head latent attention, shared experts, dense-first layers, QK-norm, windows on
    some layers, sandwich norms."""
    missing = [name for name, on in (
        ("multi-head latent attention", model.is_mla), ("shared experts", model.moe_shared_ffn),
        ("dense-first layers", model.dense_layers), ("QK-norm", model.qk_norm != "none"),
        ("a sliding window on some layers", model.window_layers is not None),
        ("four norms per layer", model.layer_norms != 2)) if on]
    if missing:
        raise ConfigError("model", model.name, "a shape without " + ", ".join(missing)
                          + " (the Megatron-LM export does not write those flags yet)")


def megatron_args(plan, *, model, seq_len: int, dtype: str) -> str:
    """The Megatron-LM flags of ``plan`` for ``model`` (a catalog Transformer), one per line;
    ConfigError for what Megatron-LM's arguments cannot say."""
    if plan.zero not in (0, 1) or plan.shard_scope != "dp":
        raise ConfigError("zero", plan.zero, "0 or 1 (--use-distributed-optimizer): Megatron-LM "
                          "shards optimizer state, not gradients or weights")
    if dtype not in ("bf16", "fp16", "fp32"):
        raise ConfigError("dtype", dtype, "bf16, fp16 or fp32")
    _check_exportable(model)
    lines = [f"--num-layers {model.layers}", f"--hidden-size {model.hidden}",
             f"--num-attention-heads {model.heads}", f"--ffn-hidden-size {model.ffn_hidden}"]
    if model.kv_heads != model.heads:
        lines += ["--group-query-attention", f"--num-query-groups {model.kv_heads}"]
    lines += [f"--max-position-embeddings {model.max_positions}", f"--seq-length {seq_len}", f"--micro-batch-size {plan.micro_batch}",
              f"--global-batch-size {plan.global_batch}",
              f"--tensor-model-parallel-size {plan.tp}", f"--pipeline-model-parallel-size {plan.pp}",
              f"--context-parallel-size {plan.cp}", f"--expert-model-parallel-size {plan.ep}"]
    if plan.pp_schedule == "interleaved":
        lines.append(f"--num-layers-per-virtual-pipeline-stage "
                     f"{model.layers // (plan.pp * plan.virtual_stages)}")
    elif plan.pp > 1 and plan.pp_schedule != "1f1b":
        raise ConfigError("pp_schedule", plan.pp_schedule, "1f1b or interleaved (Megatron-LM's)")
    if plan.sequence_parallel:
        lines.append("--sequence-parallel")
    if plan.recompute != "none":
        lines.append(f"--recompute-granularity {plan.recompute}")
    if plan.zero == 1:
        lines.append("--use-distributed-optimizer")
    if dtype != "fp32":
        lines.append(f"--{dtype}")
    return " \\\n".join(lines) + "\n"
