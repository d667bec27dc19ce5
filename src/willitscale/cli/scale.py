"""``willitscale scale``: the estimate over 1..N nodes, with speedup and scaling efficiency."""

from __future__ import annotations

import argparse

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
    p.set_defaults(run=run)


def print_scaling(rows, *, title: str = "Scaling", file=None) -> None:
    """The handbook's table "nodes | comms | compute | comms is a bottleneck", extended."""
    from willitscale.cli.output import print_table

    table = [(r.nodes, r.gpus, r.global_batch, f"{r.comms:.3f}", f"{r.compute:.3f}",
              f"{r.exposed_comms:.3f}", f"{r.step_time:.3f}", "yes" if r.comms_is_bottleneck else "no",
              f"{r.tokens_per_s:,.0f}", f"{r.mfu:.3f}", f"{r.speedup:.2f}x", f"{100 * r.efficiency:.0f}%")
             for r in rows]
    print_table(title, ["nodes", "GPUs", "global batch", "comms", "compute", "exposed", "step",
                        "comms is a bottleneck", "tokens/s", "MFU", "speedup", "scaling eff."],
                table, units=["", "", "samples", "s", "s", "s", "s", "", "", "", "", ""], file=file,
                caption="speedup and efficiency in tokens/s against the first row; "
                        "'comms is a bottleneck': the network is busier than compute")


def run(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.plan.scaling import parse_nodes, scaling_rows

    settings = settings_from_args(args, skip=("nodes",))
    nodes = parse_nodes(args.nodes or settings.get("nodes", 1))
    rows = scaling_rows(settings, nodes)
    if args.json:
        print_json([r.to_json() for r in rows])
    else:
        print_scaling(rows)
    return 0
