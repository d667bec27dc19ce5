"""``willitscale estimate``: one training step's time, breakdown, bottleneck and timeline.

Also the main job (``willitscale`` with no arguments): :func:`run_default`.
"""

from __future__ import annotations

import argparse
import sys

from willitscale.cli.paths import output_file
from willitscale.cli.plot_flag import add_plot_flag
from willitscale.cli.scenario_flags import add_scenario_flags, settings_from_args
from willitscale.errors import Infeasible, WillItScaleError

HELP = "predict one training step: time, breakdown, MFU, memory, bottleneck, timeline"

#: The main job's scenario: the handbook chapter's 2B model (Bekman's networking chapter) on 8 x A100 80GB nodes
#: with 200 Gb/s per node, 2 samples of 2048 tokens per GPU, full recomputation, HFU 0.5.
DEFAULT_SETTINGS = {
    "name": "the handbook's 2B model (Bekman's networking chapter) on A100 nodes with 200 Gb/s per node",
    "params": 2e9, "gpu": "a100-80gb", "gpus_per_node": 8, "inter_node": "200Gbps",
    "micro_batch": 2, "seq_len": 2048, "hfu": 0.5, "recompute": "full",
}
DEFAULT_NODES = (1, 2, 4, 8)
NEXT_STEPS = (
    ("willitscale estimate examples/handbook-2b-4nodes.toml --inter-node 400Gbps",
     "the same job with twice the inter-node bandwidth"),
    ("willitscale estimate --model gpt2-xl --preset dgx-a100 --nodes 4 --micro-batch 4",
     "a real model shape on a catalog node (willitscale hardware list)"),
    ("willitscale scale examples/handbook-2b-4nodes.toml --nodes 1..64",
     "where scaling stops paying off"),
    ("willitscale requirements examples/handbook-2b-4nodes.toml --nodes 1..16",
     "the inter-node bandwidth that keeps communication hidden"),
    ("willitscale estimate examples/handbook-2b-4nodes.toml --trace step.json",
     "the step's timeline in https://ui.perfetto.dev"),
    ("willitscale size --params 175B --tokens 300B --gpu h100 --utilization 0.4 --weeks 4",
     "how many GPUs a training run needs, and how few can hold it"),
)
DEFAULT_ESTIMATE_NODES = 4


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "estimate", help=HELP,
        description=HELP + ". Example: willitscale estimate --params 2e9 --gpu a100-80gb "
        "--nodes 4 --gpus-per-node 8 --inter-node 200Gbps --micro-batch 2 --seq-len 2048 "
        "--hfu 0.5 --recompute full",
    )
    add_scenario_flags(p)
    p.add_argument("--json", action="store_true", help="everything as JSON (unit-named keys)")
    p.add_argument("--trace", metavar="FILE", type=output_file("--trace"), help="write the step's timeline as Chrome/Perfetto "
                                                   "trace JSON (open at https://ui.perfetto.dev)")
    p.add_argument("--width", type=int, default=64, help="timeline width in characters")
    add_plot_flag(p)
    p.set_defaults(run=run)


def _scenario_json(scenario) -> dict:
    from willitscale.cli.estimate_text import scenario_line

    plan = scenario.plan
    return {
        "name": scenario.name, "summary": scenario_line(scenario),
        "model": scenario.model.name if scenario.model is not None else None,
        "params_given": scenario.params, "seq_len": scenario.seq_len, "dtype": scenario.dtype,
        "nodes": scenario.cluster.nodes, "gpus_per_node": scenario.cluster.node.gpus_per_node,
        "gpu": scenario.cluster.gpu.name,
        "plan": {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep,
                 "zero": plan.zero, "micro_batch": plan.micro_batch, "grad_accum": plan.grad_accum,
                 "global_batch": plan.global_batch, "recompute": plan.recompute},
    }


def _scenario_or_verdict(settings):
    """The scenario; when its batch does not split but the plan would not fit in memory with
    any split, the out-of-memory verdict instead (the more fundamental answer)."""
    from willitscale.estimation.estimate import out_of_memory_verdict
    from willitscale.scenario.build import build_scenario
    from willitscale.scenario.plan import BatchNotDivisible

    try:
        return build_scenario(settings)
    except BatchNotDivisible as batch_error:
        probe = {k: v for k, v in settings.items() if k not in ("global_batch", "grad_accum")}
        try:
            verdict = out_of_memory_verdict(build_scenario(probe), batch_problem=str(batch_error))
        except WillItScaleError:
            verdict = None
        if verdict is not None:
            raise verdict from None
        raise


def print_verdict(verdict, *, as_json: bool) -> int:
    """An infeasible plan as a verdict (exit 1): JSON with the numbers, or one clear paragraph."""
    from willitscale.cli.output import console, print_json

    memory = getattr(verdict, "memory", None)
    if as_json:
        out = {"feasible": False, "reason": verdict.reason, "message": str(verdict)}
        if memory is not None:
            out.update(memory_per_gpu_bytes=memory.total, capacity_bytes=memory.capacity,
                       memory=memory.to_json())
        print_json(out)
    else:
        from rich.markup import escape

        console().print(f"[bold red]Verdict:[/bold red] {escape(str(verdict))}")
    return verdict.exit_code


def run(args: argparse.Namespace) -> int:
    """The estimate, with its numbers, trace and plot in every case; a plan that does not fit
    is a verdict too (exit 1), after them."""
    from willitscale.cli.estimate_text import print_estimate
    from willitscale.cli.output import print_json
    from willitscale.estimation.estimate import estimate
    from willitscale.estimation.fit import fit_scenario
    from willitscale.report.timeline import check_width

    check_width(args.width, "--width")  # before the work, not after the output
    try:
        scenario = _scenario_or_verdict(settings_from_args(args))
        scenario, fit = fit_scenario(scenario)
        est = estimate(scenario, allow_oom=True)
    except Infeasible as verdict:
        return print_verdict(verdict, as_json=args.json)
    if fit is not None:
        from dataclasses import replace

        est = replace(est, knobs=fit.to_json())
    oom = _oom_verdict(est, scenario)
    if args.trace:
        from willitscale.report.trace import write_chrome_trace

        path = write_chrome_trace(est.timeline, args.trace)
        print(f"trace written to {path} (open it at https://ui.perfetto.dev)", file=sys.stderr)
    if args.plot:
        from willitscale.cli.plot_flag import estimate_plots

        estimate_plots(args.plot, est)
    if args.json:
        out = {**est.to_json(), "scenario": _scenario_json(scenario)}
        if oom is not None:
            out.update(feasible=False, reason=oom.reason, message=str(oom))
        print_json(out)
    else:
        print_estimate(est, scenario, width=args.width)
        if oom is not None:
            from rich.markup import escape

            from willitscale.cli.output import console

            console().print(f"[bold red]Verdict:[/bold red] {escape(str(oom))}")
    return oom.exit_code if oom is not None else 0


def _oom_verdict(est, scenario):
    """The out-of-memory verdict of an estimate whose plan does not fit, else None."""
    if est.memory.fits is not False:
        return None
    from willitscale.estimation.memory_verdict import out_of_memory
    from willitscale.step.engine import make_context

    return out_of_memory(est.memory, scenario, make_context(scenario))


def run_default() -> int:
    """The main job: the default scenario's estimate on 4 nodes, then its scaling table."""
    from rich.markup import escape

    from willitscale.cli.estimate_text import print_estimate
    from willitscale.cli.output import console
    from willitscale.cli.scale import print_scaling
    from willitscale.estimation.estimate import estimate
    from willitscale.plan.scaling import scaling_rows
    from willitscale.scenario.build import build_scenario

    out = console()
    out.print(f"[bold]willitscale[/bold] — {DEFAULT_SETTINGS['name']}\n")
    scenario = build_scenario({**DEFAULT_SETTINGS, "nodes": DEFAULT_ESTIMATE_NODES})
    print_estimate(estimate(scenario), scenario, brief=True)
    out.print()
    print_scaling(scaling_rows(DEFAULT_SETTINGS, DEFAULT_NODES), title="Scaling: 1 to 8 nodes")
    out.print("\n[bold]Next[/bold] (your scenario: flags or a TOML file, see examples/):")
    for command, what in NEXT_STEPS:
        out.print(f"  {escape(command)}\n      [dim]{what}[/dim]")
    return 0
