"""``willitscale requirements``: the least bandwidth that keeps communication from costing time."""

from __future__ import annotations

import argparse

from willitscale.cli.plot_flag import add_plot_flag
from willitscale.cli.scenario_flags import add_scenario_flags, settings_from_args

HELP = ("the least inter-node (or, on one node, intra-node) bandwidth at which exposed "
        "communication stays under a share of the step, over nodes and model sizes")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "requirements", help=HELP,
        description=HELP + ". The corrected form of seeds/001's 'IB >= N x P GB/s' "
        "(docs/reproductions.md). Example: willitscale requirements --params 2e9,20e9 --gpu "
        "a100-80gb --nodes 1,2,4,8 --gpus-per-node 8 --inter-node 200Gbps --micro-batch 2 "
        "--seq-len 2048 --hfu 0.5 --recompute full",
    )
    add_scenario_flags(p, nodes_help="node counts: 1,2,4,8 or a range 1..64")
    p.add_argument("--max-exposed-share", type=float, default=0.05,
                   help="largest share of the step exposed communication may take (default 0.05)")
    p.add_argument("--json", action="store_true", help="the rows as a JSON list")
    add_plot_flag(p)
    p.set_defaults(run=run)


def requirement_row(scenario, *, max_exposed_share: float) -> dict:
    """One row: the numeric requirement, the closed forms, the article's rule, the verdict."""
    from willitscale.plan.estimate import estimate
    from willitscale.plan.requirements import allreduce_node_bytes, article_001_rule, least_link_bandwidth

    est = estimate(scenario, allow_oom=True)  # a bandwidth question: memory is reported, not judged
    needed, at = least_link_bandwidth(scenario, max_exposed_share=max_exposed_share)
    cluster, ddp = scenario.cluster, scenario.ddp
    node = cluster.node
    grad = est.params * ddp.grad_bytes
    backward_share = est.breakdown.backward / (est.breakdown.forward + est.breakdown.backward)
    if cluster.nodes > 1:
        link, eff, now = "inter-node, per node", node.nic.efficiency, node.nics * node.nic.bandwidth
        traffic = float(allreduce_node_bytes(grad, cluster.nodes))
    else:
        g = node.gpus_per_node
        link, eff, now = "intra-node, per GPU", node.intra_link.efficiency, node.usable_intra_bandwidth
        traffic = 2 * (g - 1) / g * grad
    closed_compute = traffic / (est.compute * eff)
    closed_backward = traffic / (backward_share * est.compute * eff)
    return {
        "nodes": cluster.nodes, "gpus": cluster.gpus, "params": est.params,
        "global_batch": est.global_batch, "compute_s": est.compute, "link": link,
        "current_bandwidth_Gbps": now * 8 / 1e9,
        "required_bandwidth_Gbps": None if needed is None else needed * 8 / 1e9,
        "comms_within_compute_Gbps": closed_compute * 8 / 1e9,
        "comms_within_backward_Gbps": closed_backward * 8 / 1e9,
        "article_001_rule_Gbps": float(article_001_rule(cluster.nodes, est.params)) * 8 / 1e9
        if cluster.nodes > 1 else None,
        "exposed_share_now": est.exposed_comms / est.step_time,
        "exposed_share_at_required": None if needed is None else at.exposed_comms / at.step_time,
        "enough": needed is not None and now >= needed,
        "limited_by": None if needed is not None else (
            "latency" if cluster.nodes == 1 else "intra"),
    }


def run(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.cli.scale import compact_table
    from willitscale.plan.build import build_scenario
    from willitscale.plan.scaling import parse_nodes
    from willitscale.units import format_count, parse_count

    settings = settings_from_args(args, skip=("nodes", "params"))
    nodes = parse_nodes(args.nodes or settings.get("nodes", 1))
    params_list = ([parse_count(p.strip(), field="--params") for p in args.params.split(",") if p.strip()]
                   if args.params else [settings.get("params")])
    rows = []
    for params in params_list:
        for n in nodes:
            layer = {"nodes": n} if params is None else {"nodes": n, "params": params}
            rows.append(requirement_row(build_scenario({**settings, **layer}),
                                        max_exposed_share=args.max_exposed_share))
    if args.plot:
        from willitscale.cli.plot_flag import requirements_plots

        requirements_plots(args.plot, rows, share=args.max_exposed_share)
    if args.json:
        print_json(rows)
        return 0

    def gbps(x):
        return "-" if x is None else f"{x:,.0f}"

    compact_table(
        f"Least bandwidth for exposed communication <= {args.max_exposed_share:.0%} of the step",
        (("params", ""), ("nodes", ""), ("link", ""), ("now", "Gb/s"), ("needed", "Gb/s"),
         ("comms<=", "compute"), ("comms<=", "backward"), ("seeds/001", "rule"),
         ("exposed", "now"), ("enough", "")),
        [(format_count(r["params"]), r["nodes"], "per node" if r["link"].startswith("inter") else "per GPU",
          gbps(r["current_bandwidth_Gbps"]),
          gbps(r["required_bandwidth_Gbps"]) if r["required_bandwidth_Gbps"] is not None
          else r["limited_by"], gbps(r["comms_within_compute_Gbps"]),
          gbps(r["comms_within_backward_Gbps"]), gbps(r["article_001_rule_Gbps"]),
          f"{100 * r['exposed_share_now']:.0f}%", "yes" if r["enough"] else "no") for r in rows],
        caption="Line rates, one direction: inter-node per node (all NICs), intra-node per GPU on "
                "one node. needed: the full model (buckets, overlap, NCCL's algorithm) by "
                "bisection; comms<=compute / <=backward: closed forms, bandwidth-bound; seeds/001 "
                "rule: N x P GB/s (docs/reproductions.md). 'intra' under needed: the intra-node "
                "link runs out first, no inter-node bandwidth is enough")
    return 0
