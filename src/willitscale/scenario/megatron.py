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
comes from flags. The job runs Megatron-LM, so memory is counted as its layout (``framework``
megatron, :mod:`willitscale.memory.frameworks`), not what the plan alone would imply (a pure
data-parallel plan implies DDP or DeepSpeed); ``--framework`` overrides it. A file holding the command (a launch script) is read from its first ``--``
flag; shell line continuations are joined; other flags are ignored.
"""

from __future__ import annotations

import shlex
from typing import Any

from willitscale.errors import ConfigError

__all__ = ["is_megatron", "megatron_settings", "megatron_args", "settings_of_arguments",
           "catalog_model", "recompute_fields", "check_plan", "FRAMEWORK", "JOB_FILE_SHAPE",
           "shape_settings"]

#: the memory layout (memory.frameworks) of a job Megatron-LM or NeMo (Megatron-Core) runs
FRAMEWORK = "megatron"

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


def _flag_name(flag: str) -> str:
    return flag


def _number(args: dict, flag: str, file: str, name=_flag_name) -> int:
    value = args[flag]
    if isinstance(value, bool):
        raise ConfigError(f"{file}: {name(flag)}", value, "an integer")
    try:
        return int(str(value))
    except ValueError:
        raise ConfigError(f"{file}: {name(flag)}", value, "an integer (a shell variable cannot be "
                                                          "read here: put its value)") from None


def megatron_settings(text: str, file: str) -> dict[str, Any]:
    """Scenario settings (see :mod:`willitscale.scenario.settings`) of a Megatron-LM command."""
    return settings_of_arguments(_arguments(text, file), file)


def settings_of_arguments(args: dict[str, Any], file: str, name=_flag_name) -> dict[str, Any]:
    """Scenario settings of Megatron-LM arguments ``{"--flag": value or True}``; ``name(flag)``
    is how an error names a flag (the YAML reader names its keys)."""
    out: dict[str, Any] = {key: _number(args, flag, file, name) for flag, key in _INT.items()
                           if flag in args}
    out["framework"] = FRAMEWORK
    shape = {key: _number(args, flag, file, name) for flag, key in _SHAPE.items() if flag in args}
    out["sequence_parallel"] = bool(args.get("--sequence-parallel"))
    out["zero"] = 1 if args.get("--use-distributed-optimizer") else 0
    out["dtype"] = "bf16" if args.get("--bf16") else "fp16" if args.get("--fp16") else "fp32"
    granularity = args.get("--recompute-granularity")
    if granularity not in (None, "full", "selective"):
        raise ConfigError(f"{file}: {name('--recompute-granularity')}", granularity,
                          "full or selective")
    out["recompute"] = granularity or ("selective" if args.get("--recompute-activations") else "none")
    if granularity == "full" and args.get("--recompute-method") == "block":
        if "--recompute-num-layers" not in args:
            raise ConfigError(f"{file}: {name('--recompute-num-layers')}", None, "the layers per "
                              "pipeline stage recomputed (recompute method block needs it)")
        out["recompute"] = f"layers:{_number(args, '--recompute-num-layers', file, name)}"
    out.update(shape_settings(shape, file))
    model = catalog_model(shape)
    if "--num-layers-per-virtual-pipeline-stage" in args:
        per_stage = _number(args, "--num-layers-per-virtual-pipeline-stage", file, name)
        layers, pp = shape.get("layers") or (model.layers if model else 0), out.get("pp", 1)
        stages, rest = divmod(layers, max(pp * per_stage, 1))
        if not layers or rest or stages < 2:
            raise ConfigError(f"{file}: {name('--num-layers-per-virtual-pipeline-stage')}", per_stage,
                              f"a divisor of --num-layers {layers or '?'} / pp {pp} giving >= 2 "
                              "stages per rank")
        out["pp_schedule"], out["virtual_stages"] = "interleaved", stages
    return out


#: the settings key holding ``(file, shape)``: the model shape a job file states, checked against
#: the scenario's model when it is built (:func:`willitscale.scenario.build.check_job_file_shape`)
JOB_FILE_SHAPE = "_job_file_shape"


def shape_settings(shape: dict[str, int | None], file: str) -> dict:
    """Settings from the model shape a job file states: the catalog model of that shape (when
    exactly one has it) and the shape itself, so that a ``--model`` of another shape, or no
    model at all, is an error naming the file's fields rather than a silent substitute."""
    given = {k: v for k, v in shape.items() if v is not None}
    # the fields that make the model (a file's max_position_embeddings is often the run's
    # sequence length, not the model's: it picks a catalog model when it agrees, no more)
    core = {k: v for k, v in given.items() if k != "max_positions"}
    if not core:
        return {}
    model = catalog_model(given) or catalog_model(core)
    return {JOB_FILE_SHAPE: (file, core), **({"model": model.name} if model is not None else {})}


def catalog_model(shape: dict[str, int]):
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


def check_plan(plan, dtype: str) -> None:
    """ConfigError for a plan or dtype Megatron-LM (and NeMo, which runs Megatron-Core) cannot
    run: ZeRO-2/3 or hybrid sharding, the GPipe schedule, a dtype other than bf16/fp16/fp32."""
    if plan.zero not in (0, 1) or plan.shard_scope != "dp":
        raise ConfigError("zero", plan.zero, "0 or 1 (--use-distributed-optimizer): Megatron-LM "
                          "shards optimizer state, not gradients or weights")
    if dtype not in ("bf16", "fp16", "fp32"):
        raise ConfigError("dtype", dtype, "bf16, fp16 or fp32")
    if plan.pp > 1 and plan.pp_schedule not in ("1f1b", "interleaved"):
        raise ConfigError("pp_schedule", plan.pp_schedule, "1f1b or interleaved (Megatron-LM's)")


def megatron_args(plan, *, model, seq_len: int, dtype: str) -> str:
    """The Megatron-LM flags of ``plan`` for ``model`` (a catalog Transformer), one per line;
    ConfigError for what Megatron-LM's arguments cannot say."""
    check_plan(plan, dtype)
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
    if plan.sequence_parallel:
        lines.append("--sequence-parallel")
    granularity, method, layers = recompute_fields(plan.recompute)
    if granularity:
        lines.append(f"--recompute-granularity {granularity}")
    if method:
        lines += [f"--recompute-method {method}", f"--recompute-num-layers {layers}"]
    if plan.zero == 1:
        lines.append("--use-distributed-optimizer")
    if dtype != "fp32":
        lines.append(f"--{dtype}")
    return " \\\n".join(lines) + "\n"


def recompute_fields(mode: str) -> tuple[str | None, str | None, int | None]:
    """Megatron-LM's (granularity, method, num_layers) of a recomputation mode: ``full`` is
    granularity full with every layer (method uniform, 1 layer a group, or none given),
    ``layers:N`` is method block with N layers per stage; ConfigError for modes Megatron-LM's
    arguments cannot say (``every:K``, ``modules:...``)."""
    if mode in ("none", "selective", "full"):
        return (None if mode == "none" else mode), None, None
    if mode.startswith("layers:"):
        return "full", "block", int(mode.split(":", 1)[1])
    raise ConfigError("recompute", mode, "none, selective, full or layers:N (Megatron-LM's "
                      "granularity and method block)")
