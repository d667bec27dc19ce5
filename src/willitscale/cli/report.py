"""``willitscale report``: one self-contained HTML file to share (inputs, verdict, breakdown,
charts, assumptions and what would change the verdict)."""

from __future__ import annotations

import argparse
import shlex
import sys

from willitscale.cli.paths import output_file, write_text
from willitscale.cli.plot_flag import add_plot_flag
from willitscale.cli.scenario_flags import add_scenario_flags, settings_from_args

HELP = "one HTML file to share: verdict, breakdown, scaling, network, what would change it"

DESCRIPTION = """\
What would someone who will not run a CLI need to see? One HTML file: the verdict in one
sentence, the headline numbers, what would change the verdict (each lever estimated again), the
step's timeline and breakdown, scaling over node counts, the communication and the bandwidth
each node count needs, memory, the inputs, and every assumption with its source. Every figure
is inlined: it opens without willitscale or a network. When the scenario leaves the parallel
layout open, the planner's best plans are added (--plan, --no-plan). docs/reports.md."""


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser(
        "report", help=HELP, description=DESCRIPTION,
        usage="%(prog)s [SCENARIO.toml] [flags] --html FILE",
        epilog=examples(
            "willitscale report examples/handbook-2b-4nodes.toml --html report.html",
            "willitscale report --params 2e9 --gpu a100-80gb --nodes 4 --gpus-per-node 8 "
            "--inter-node 200Gbps --micro-batch 2 --seq-len 2048 --hfu 0.5 --recompute full "
            "--html out.html --plot figs",
            "willitscale report --model gpt2-xl --gpu h100 --nodes 4 --gpus-per-node 8 "
            "--inter-node 100Gbps --seq-len 1024 --global-batch 256 --html xl.html"),
    )
    add_scenario_flags(p)
    p.add_argument("--html", metavar="FILE", required=True, type=output_file("--html"), help="the HTML file to write")
    p.add_argument("--sweep", metavar="NODES",
                   help="node counts for the scaling charts: 1,2,4,8 or 1..64 (default: powers "
                        "of two from 1 to 4x the nodes, at least 16)")
    p.add_argument("--max-exposed-share", type=float, default=0.05,
                   help="exposed-communication share the bandwidth requirement aims for (0.05)")
    p.add_argument("--figure-format", choices=("svg", "png"), default="svg",
                   help="how figures are inlined (default svg: sharp at any zoom)")
    plans = p.add_mutually_exclusive_group()
    plans.add_argument("--plan", dest="plans", action="store_const", const="yes",
                       help="run the planner and add its best plans (default: only when the "
                            "scenario gives no parallel layout and the model has a shape)")
    plans.add_argument("--no-plan", dest="plans", action="store_const", const="no",
                       help="never run the planner")
    add_plot_flag(p)
    p.set_defaults(run=run)


_SPECIAL = {"scenario_flag": "--scenario", "step_time_one_gpu": "--compute-time-per-step",
            "overlap": "--no-overlap", "data_overlapped": "--data-not-overlapped"}
_DEFAULTS = {"max_exposed_share": 0.05, "figure_format": "svg"}
_CHOICES = {"plans": {"yes": "--plan", "no": "--no-plan"}}


def _command_line(args: argparse.Namespace) -> str:
    """The command that made the report, for its footer: the real command line when the CLI was
    run as ``willitscale report ...``, else rebuilt from the parsed flags (called in-process)."""
    if sys.argv[1:2] == ["report"]:
        return "willitscale " + shlex.join(sys.argv[1:])
    words = ["report"] + ([args.scenario_file] if args.scenario_file else [])
    for dest, value in vars(args).items():
        if dest in ("run", "command", "scenario_file") or value in (None, False):
            continue
        if _DEFAULTS.get(dest) == value:
            continue
        if dest in _CHOICES:
            words.append(_CHOICES[dest][value])
            continue
        flag = _SPECIAL.get(dest, "--" + dest.replace("_", "-"))
        words += [flag] if value is True or dest in ("overlap", "data_overlapped") else [flag, str(value)]
    return "willitscale " + shlex.join(words)


#: plans the report shows
REPORT_PLANS = 5


def wants_plans(choice: str | None, settings) -> bool:
    """``--plan``/``--no-plan``, else whether the scenario leaves the parallel layout open (no
    degree, ZeRO or FSDP given) for a model with a shape (with a parameter count only, the
    planner can vary only ZeRO and the micro-batch: ask with --plan)."""
    from willitscale.report.plans import leaves_parallelism_open

    if choice is not None:
        return choice == "yes"
    return settings.get("model") is not None and leaves_parallelism_open(settings)


def _plans(args: argparse.Namespace, settings) -> list:
    if not wants_plans(args.plans, settings):
        return []
    from willitscale.report.plans import best_plans

    records, result = best_plans(settings, top=REPORT_PLANS)
    if not records:
        print(f"the planner found no plan that fits ({result.evaluated:,} evaluated)", file=sys.stderr)
    return records


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from willitscale.errors import ConfigError
    from willitscale.plan.scaling import parse_nodes
    from willitscale.report.contents import build_contents, verdict
    from willitscale.report.html import render_html, report_charts
    from willitscale.report.plots.base import require_matplotlib, write_charts

    require_matplotlib()
    settings = settings_from_args(args)
    sweep = parse_nodes(args.sweep) if args.sweep else None
    contents = build_contents(settings, sweep=sweep, share=args.max_exposed_share,
                              command=_command_line(args), plans=_plans(args, settings))
    charts = report_charts(contents)
    page = render_html(contents, figure_format=args.figure_format, charts=charts)
    path = Path(args.html)
    try:
        write_text(path, page)
    except OSError as exc:
        raise ConfigError("--html", args.html, f"a file that can be written ({exc.strerror})") from exc
    if args.plot:
        write_charts([c for group in charts.values() for c in group], args.plot)
    from rich.markup import escape

    from willitscale.cli.output import console

    console().print(escape(verdict(contents)))
    print(f"report written to {path} ({len(page) / 1e6:.1f} MB, self-contained)", file=sys.stderr)
    return 0
