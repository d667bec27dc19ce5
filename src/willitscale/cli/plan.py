"""``willitscale plan``: search the parallel plans that fit, rank them, explain the best.

The model, cluster and training flags are those of ``estimate`` (without the plan's own:
degrees, ZeRO, schedule, micro-batch, recomputation), plus ``--gpus`` and the search space.
"""

from __future__ import annotations

import argparse
import sys

from willitscale.cli.plot_flag import add_plot_flag
from willitscale.cli.scenario_flags import add_scenario_flags, settings_from_args

#: settings the planner searches rather than takes
SEARCHED = ("dp", "tp", "pp", "cp", "ep", "zero", "fsdp", "shard_scope", "recompute", "pp_schedule",
            "virtual_stages", "sequence_parallel", "micro_batch", "grad_accum")

HELP = "which parallel plan runs fastest within memory, and why"

DESCRIPTION = """\
Which parallel plan runs this job fastest, and why? Searches every plan of the model on the
cluster (data, tensor, pipeline, context and expert parallelism; ZeRO and FSDP; micro-batch;
recomputation; pipeline schedule), rejects those that cannot run or do not fit in memory and
counts why, ranks the rest by predicted throughput for the global batch and explains the best
against their neighbours. docs/planner.md."""


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser(
        "plan", help=HELP, description=DESCRIPTION,
        usage="%(prog)s [SCENARIO.toml] --model NAME --global-batch B [flags]",
        epilog=examples(
            "willitscale plan --model gpt3-175b --gpu a100-80gb --gpus 1024 --gpus-per-node 8 "
            "--inter-node 8x200Gbps --global-batch 1536 --seq-len 2048",
            "willitscale plan --model llama3-8b --gpu h100 --gpus 64 --gpus-per-node 8 "
            "--global-batch 512 --seq-len 8192 --tp 1,2,4 --zero 1,3 --top 5 --plot figs"))
    add_scenario_flags(p, plan_flags=False, nodes_help="number of nodes (or give --gpus)")
    s = p.add_argument_group("search")
    s.add_argument("--gpus", type=int, help="GPUs to plan for (nodes = gpus / gpus-per-node)")
    for name, what in (("tp", "tensor-parallel degrees"), ("pp", "pipeline stages"),
                       ("cp", "context-parallel degrees"), ("ep", "expert-parallel degrees"),
                       ("zero", "ZeRO stages"), ("recompute", "recomputation modes"),
                       ("schedules", "pipeline schedules"), ("virtual-stages", "interleaving depths")):
        s.add_argument(f"--{name}", help=f"{what} to try, comma-separated (default: all that apply)")
    s.add_argument("--max-micro-batch", type=int, default=16, help="largest micro-batch (default 16)")
    s.add_argument("--memory-fraction", type=float,
                   help="share of HBM a plan may use (default: the scenario file's, else 1: the "
                        "CUDA context, NCCL buffers and the allocator's reserve are counted); "
                        "estimate judges 'fits' by the same setting")
    s.add_argument("--allow-tp-across-nodes", action="store_true",
                   help="consider tp wider than a node (rejected by default)")
    s.add_argument("--no-hybrid", action="store_true", help="skip FSDP hybrid sharding")
    s.add_argument("--framework", choices=("megatron", "fsdp", "deepspeed", "ddp"),
                   help="search only this framework's ZeRO stages (default: each plan's implied "
                        "framework, docs/memory.md)")
    s.add_argument("--top", type=int, default=10, help="plans to show (default 10)")
    s.add_argument("--explain", type=int, default=3, help="top plans to explain (default 3)")
    p.add_argument("--json", action="store_true", help="the result as JSON")
    p.add_argument("--torchtitan", metavar="FILE", default=None,
                   help="write the fastest plan as a torchtitan job TOML (docs/formats.md); the "
                        "fastest plan torchtitan can run (FSDP or DDP, sequence-parallel TP)")
    p.add_argument("--megatron", metavar="FILE", default=None,
                   help="write the fastest plan Megatron-LM can run as its command-line flags "
                        "(DDP or the distributed optimizer), one per line (docs/formats.md)")
    p.add_argument("--megatron-yaml", metavar="FILE", default=None,
                   help="write the fastest plan Megatron-LM can run as the keys of its --yaml-cfg "
                        "file (docs/formats.md)")
    p.add_argument("--nemo", metavar="FILE", default=None,
                   help="write the fastest plan NeMo 1.x can run as the keys of its Hydra YAML "
                        "config, trainer.devices/num_nodes included (docs/formats.md)")
    p.add_argument("--progress", action="store_true", help="show progress even when not a terminal")
    add_plot_flag(p)
    p.set_defaults(run=run)


def _ints(text, field):
    from willitscale.errors import ConfigError

    if text is None:
        return None
    parts = [x.strip() for x in str(text).split(",")]
    if not all(parts):
        raise ConfigError(f"--{field}", text, "comma-separated integers with no empty entries, "
                                              "e.g. 1,2,4,8")
    try:
        values = tuple(int(x) for x in parts)
    except ValueError:
        raise ConfigError(f"--{field}", text, "comma-separated integers, e.g. 1,2,4,8") from None
    least = 0 if field == "zero" else 1
    if not values or min(values) < least:
        raise ConfigError(f"--{field}", text, f"comma-separated integers >= {least}")
    return values


def _words(text, field, allowed):
    from willitscale.errors import ConfigError

    if text is None:
        return None
    values = tuple(x.strip() for x in str(text).split(","))
    bad = [v for v in values if v not in allowed]
    if bad or not values:
        raise ConfigError(f"--{field}", text, "comma-separated, from " + ", ".join(allowed))
    return values


def _modes(text):
    """Recomputation modes, comma-separated (``modules:a+b`` writes a module set here)."""
    from willitscale.errors import ConfigError
    from willitscale.workload.recompute import MODE_HELP, parse_recompute

    if text is None:
        return None
    words = [w.strip() for w in str(text).split(",")]
    if not all(words):
        raise ConfigError("--recompute", text, "comma-separated modes with no empty entries: "
                          + MODE_HELP + " (modules joined by +)")
    try:
        return tuple(parse_recompute(w.replace("+", ",")).name for w in words)
    except ConfigError:
        raise ConfigError("--recompute", text, "comma-separated modes: " + MODE_HELP
                          + " (modules joined by +)") from None


def space_from_args(args, memory_fraction: float | None = None):
    """The search space the flags give; ``memory_fraction`` is the scenario's (the flag, a
    scenario file's ``memory_fraction``, else the default), so plan and estimate agree."""
    from willitscale.memory.stage import DEFAULT_MEMORY_FRACTION
    from willitscale.plan.search import SearchSpace
    from willitscale.scenario.plan import PP_SCHEDULES

    given = {
        "tp": _ints(args.tp, "tp"), "pp": _ints(args.pp, "pp"), "cp": _ints(args.cp, "cp"),
        "ep": _ints(args.ep, "ep"), "zero": _ints(args.zero, "zero"),
        "recompute": _modes(args.recompute),
        "schedules": _words(args.schedules, "schedules", PP_SCHEDULES),
        "virtual_stages": _ints(getattr(args, "virtual_stages"), "virtual-stages"),
    }
    return SearchSpace(**{k: v for k, v in given.items() if v is not None},
                       max_micro_batch=args.max_micro_batch,
                       memory_fraction=memory_fraction or args.memory_fraction or DEFAULT_MEMORY_FRACTION,
                       allow_tp_across_nodes=args.allow_tp_across_nodes, hybrid=not args.no_hybrid,
                       framework=args.framework)


def planning_settings(settings: dict, gpus: int | None) -> dict:
    """``settings`` without the batch split, on ``gpus`` GPUs as whole nodes (when given)."""
    from willitscale.errors import ConfigError
    from willitscale.hardware import build_cluster
    from willitscale.hardware.model import MAX_GPUS

    base = {k: v for k, v in settings.items() if k not in ("global_batch", "micro_batch", "grad_accum")}
    probe = build_cluster(preset=base.get("preset"), gpu=base.get("gpu"), nodes=1,
                          gpus_per_node=base.get("gpus_per_node"), intra_node=base.get("intra_node"),
                          inter_node=base.get("inter_node"))
    g = probe.node.gpus_per_node
    why = "the planner's bound: it places the ranks of awkward cluster sizes one by one"
    if gpus is not None and gpus > MAX_GPUS:
        raise ConfigError("--gpus", gpus, f"at most {MAX_GPUS:,} ({why})")
    if base.get("nodes") is not None and base["nodes"] * g > MAX_GPUS:
        raise ConfigError("--nodes", base["nodes"], f"at most {MAX_GPUS // g:,} nodes of {g} GPUs "
                                                    f"= {MAX_GPUS:,} GPUs ({why})")
    if gpus is not None:
        if gpus < 1 or gpus % g:
            raise ConfigError("--gpus", gpus, f"a multiple of the {g} GPUs per node")
        if base.get("nodes") not in (None, gpus // g):
            raise ConfigError(f"--gpus {gpus} and --nodes {base['nodes']} disagree "
                              f"({g} GPUs per node)")
        base["nodes"] = gpus // g
    return base


def scenario_for(settings: dict, gpus: int | None):
    """The model and cluster to plan on: ``gpus`` GPUs, as whole nodes."""
    from willitscale.scenario.build import build_scenario

    return build_scenario({**planning_settings(settings, gpus), "micro_batch": 1})


def run(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.cli.plan_output import plan_json, print_plans
    from willitscale.errors import ConfigError
    from willitscale.plan.search import search

    for flag in ("top", "explain"):
        if getattr(args, flag) < (1 if flag == "top" else 0):
            raise ConfigError(f"--{flag}", getattr(args, flag),
                              "an integer >= 1 (plans to show)" if flag == "top" else
                              "an integer >= 0 (top plans to explain)")
    settings = settings_from_args(args, skip=SEARCHED)
    if settings.get("global_batch") is None:
        raise ConfigError("--global-batch is required: the planner splits it over dp and micro-batches")
    base = planning_settings(settings, args.gpus)
    scenario = scenario_for(settings, args.gpus)
    space = space_from_args(args, scenario.memory_fraction)
    model = scenario.model
    if model is not None and not model.moe_experts and any(e > 1 for e in space.ep or ()):
        raise ConfigError("--ep", args.ep, f"1: expert parallelism needs a mixture-of-experts model "
                                           f"and {model.name} is dense (no experts)")
    gpus = scenario.cluster.gpus
    with _progress(args) as progress:
        result = search(scenario, gpus=gpus, global_batch=settings["global_batch"], space=space,
                        progress=progress)
    if result.interrupted:
        print("interrupted: showing the plans evaluated so far", file=sys.stderr)
    for kind in FORMATS:
        if getattr(args, kind):
            _write_framework(kind, getattr(args, kind), result, scenario)
    if args.json:
        print_json(plan_json(result, scenario, top=args.top, explain=args.explain))
    else:
        print_plans(result, scenario, top=args.top, explain=args.explain)
    if args.plot and len(result.ranked):
        from willitscale.cli.plot_flag import plan_plots
        from willitscale.report.plans import plan_records

        plan_plots(args.plot, plan_records({**base, "nodes": scenario.cluster.nodes}, result,
                                           top=args.top), top=args.top)
    return 0 if len(result.ranked) else 1


class _progress:
    """A rich progress bar on stderr (terminals, or --progress), else nothing."""

    def __init__(self, args):
        self.show = args.progress or sys.stderr.isatty()
        self.bar = None

    def __enter__(self):
        if not self.show:
            return None
        from rich.console import Console
        from rich.progress import Progress

        self.bar = Progress(console=Console(file=sys.stderr), transient=True)
        self.bar.start()
        task = self.bar.add_task("timing the plans that fit", total=None)

        def update(done: int, total: int) -> None:
            self.bar.update(task, completed=done, total=total)

        return update

    def __exit__(self, *exc):
        if self.bar is not None:
            self.bar.stop()
        return False


#: --FLAG -> what is written
FORMATS = {"torchtitan": "torchtitan job file", "megatron": "megatron arguments",
           "megatron_yaml": "Megatron-LM YAML config", "nemo": "NeMo config"}


def _framework_text(kind: str, plan, scenario) -> str:
    """``plan`` in format ``kind`` (a key of FORMATS); ConfigError when it cannot say it."""
    from willitscale.scenario.megatron import megatron_args
    from willitscale.scenario.megatron_yaml import megatron_yaml
    from willitscale.scenario.nemo import nemo_yaml
    from willitscale.scenario.torchtitan import torchtitan_toml

    model, seq_len, dtype = scenario.model, scenario.seq_len, scenario.dtype
    if kind == "torchtitan":
        return torchtitan_toml(plan, model=model.name, layers=model.layers, seq_len=seq_len,
                               dtype=dtype)
    if kind == "megatron":
        return megatron_args(plan, model=model, seq_len=seq_len, dtype=dtype)
    if kind == "megatron_yaml":
        return megatron_yaml(plan, model=model, seq_len=seq_len, dtype=dtype)
    cluster = scenario.cluster
    return nemo_yaml(plan, model=model, seq_len=seq_len, dtype=dtype, nodes=cluster.nodes,
                     gpus_per_node=cluster.node.gpus_per_node)


def _read_back_framework(kind: str, plan) -> str:
    """The framework (memory layout) a file of format ``kind`` holding ``plan`` reads back as."""
    from willitscale.scenario.megatron import FRAMEWORK
    from willitscale.scenario.torchtitan import torchtitan_framework

    return torchtitan_framework(plan) if kind == "torchtitan" else FRAMEWORK


def _write_framework(kind: str, path: str, result, scenario) -> None:
    """The fastest plan framework ``kind`` (a key of FORMATS) can express, its memory counted
    as that framework's (the one the file reads back as), written to ``path`` in its format."""
    from pathlib import Path

    from willitscale.errors import ConfigError

    flag = "--" + kind.replace("_", "-")
    if scenario.model is None:
        raise ConfigError(f"{flag} needs a model shape (--model), not only --params")
    reasons = []
    for index in result.ranked:
        plan = result.batch.plan(int(index))
        try:
            text = _framework_text(kind, plan, scenario)
        except ConfigError as exc:
            reasons.append(str(exc))
            continue
        runs = _read_back_framework(kind, plan)
        if plan.resolved_framework != runs:
            reasons.append(f"{plan!r} was timed with {plan.resolved_framework}'s memory and "
                           f"the file reads back as {runs} (plan --framework {runs} searches "
                           "its plans)")
            continue
        Path(path).write_text(text)
        print(f"{FORMATS[kind]} written to {path}: {plan!r}", file=sys.stderr)
        return
    raise ConfigError(f"{flag}: no feasible plan {kind.replace('_', ' ')} can run"
                      f"{' (' + reasons[0] + ')' if reasons else ''}")
