"""``willitscale scale``: the estimate over 1..N nodes, with speedup and scaling efficiency."""

from __future__ import annotations

import argparse

from willitscale.cli.plot_flag import add_plot_flag
from willitscale.cli.scenario_flags import add_scenario_flags, settings_from_args

HELP = "the estimate over a list or range of node counts: comms vs compute, speedup, efficiency"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scale", help=HELP,
        description=HELP + ". Example: willitscale scale --params 2e9 --gpu a100-80gb "
        "--nodes 1,2,4,8 --gpus-per-node 8 --inter-node 200Gbps --micro-batch 2 --seq-len 2048 "
        "--hfu 0.5 --recompute full",
    )
    add_scenario_flags(p, nodes_help="node counts: 1,2,4,8 or a range 1..64 (powers of two)")
    p.add_argument("--json", action="store_true", help="the rows as a JSON list")
    add_plot_flag(p)
    p.set_defaults(run=run)


def _short(x: float) -> str:
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= scale:
            return f"{x / scale:.3g}{suffix}"
    return f"{x:.3g}"


def compact_table(title: str, columns, rows, *, caption: str = "", file=None) -> None:
    """A rich table without vertical rules; ``columns`` are ``(name, unit)`` pairs (unit under the
    name). Compact enough for a dozen columns in 80 terminal columns."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from willitscale.cli.output import console

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False,
                  padding=0, caption=caption or None, caption_justify="left")
    for name, unit in columns:
        table.add_column(f"{name}\n[dim]{unit}[/dim]" if unit else name, justify="right")
    for row in rows:
        table.add_row(*(Text(str(v)) for v in row))  # plain text, never rich markup
    console(file).print(table)




def print_scaling(rows, *, title: str = "Scaling", file=None) -> None:
    """The handbook's table "nodes | comms | compute | comms is a bottleneck", extended."""
    columns = (("nodes", ""), ("GPUs", ""), ("batch", ""), ("comms", "s"), ("comp.", "s"),
               ("exp.", "s"), ("step", "s"), ("limit", ""), ("fits", ""), ("tok/s", ""),
               ("MFU", ""), ("speed", "up"), ("eff.", ""))
    from willitscale.report.chartdata import LIMIT_SHORT

    fits = {True: "yes", False: "no", None: "?"}
    compact_table(title, columns, [
        (r.nodes, r.gpus, r.global_batch, f"{r.comms:.3f}", f"{r.compute:.3f}",
         f"{r.exposed_comms:.3f}", f"{r.step_time:.3f}", LIMIT_SHORT.get(r.bottleneck, r.bottleneck),
         fits[r.fits], _short(r.tokens_per_s), f"{r.mfu:.2f}", f"{r.speedup:.2f}x",
         f"{100 * r.efficiency:.0f}%") for r in rows],
        caption="comp.: compute, forward + backward; exp.: exposed communication; limit: the "
                "bottleneck, inter/intra(-node network) when exposed communication exceeds 5% of "
                "the step, OOM when the plan does not fit (its numbers are shown anyway); fits: "
                "memory (?: activations unknown); speedup and eff.: tokens/s against the first "
                "row; batch in samples", file=file)


def scaling_title(settings) -> str:
    """``Scaling: <the scenario's name, or what it is>``."""
    if settings.get("name"):
        return f"Scaling: {settings['name']}"
    what = settings.get("model") or (f"{settings['params'] / 1e9:.3g}B params"
                                     if settings.get("params") else "")
    where = settings.get("preset") or " ".join(
        str(x) for x in (settings.get("gpus_per_node") and f"{settings['gpus_per_node']} x",
                         settings.get("gpu")) if x)
    inter = f", {settings['inter_node']} per node" if settings.get("inter_node") else ""
    return "Scaling: " + ", ".join(x for x in (what, where) if x) + inter


def run(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.plan.scaling import parse_nodes, scaling_rows

    settings = settings_from_args(args, skip=("nodes",))
    nodes = parse_nodes(args.nodes if args.nodes is not None else settings.get("nodes", 1))
    rows = scaling_rows(settings, nodes)
    if args.plot:
        from willitscale.cli.plot_flag import scale_plots

        scale_plots(args.plot, settings, nodes)
    if args.json:
        print_json([r.to_json() for r in rows])
    else:
        print_scaling(rows, title=scaling_title(settings))
    return 0
