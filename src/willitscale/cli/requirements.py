"""``willitscale requirements``: the least bandwidth that keeps communication from costing time."""

from __future__ import annotations

import argparse

from willitscale.cli.plot_flag import add_plot_flag
from willitscale.cli.scenario_flags import add_scenario_flags, settings_from_args

HELP = ("the least bandwidth of the limiting link (the NICs, or the link inside the node when it "
        "limits) at which exposed communication stays under a share of the step, over nodes "
        "and model sizes")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "requirements", help=HELP,
        description=HELP + ". The corrected form of 'Will it scale to N GPUs?''s 'IB >= N x P GB/s' "
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


_LEVEL_LINK = {"inter": "inter-node, per node", "intra": "intra-node, per GPU",
               "measured": "measured all-reduce"}


def requirement_row(scenario, *, max_exposed_share: float) -> dict:
    """One row: the numeric requirement on the limiting level, the closed forms (with the
    traffic of the algorithm the model runs), the article's rule, the verdict."""
    from willitscale.collectives.lines import cluster_links
    from willitscale.estimation.comms import gradient_allreduce
    from willitscale.estimation.estimate import estimate
    from willitscale.plan.requirements import (
        article_001_rule,
        level_bytes,
        link_requirement,
    )

    est = estimate(scenario, allow_oom=True)  # a bandwidth question: memory is reported, not judged
    req = link_requirement(scenario, max_exposed_share=max_exposed_share)
    cluster = scenario.cluster
    links = cluster_links(scenario)
    level = req.level if req.level in ("intra", "inter") else (
        "inter" if cluster.nodes > 1 else "intra")
    grad = est.params * scenario.ddp.grad_bytes
    allreduce = gradient_allreduce(scenario, grad, links)
    backward_share = est.breakdown.backward / (est.breakdown.forward + est.breakdown.backward)
    closed = {"algorithm": None, "bytes": None, "compute": None, "backward": None}
    if scenario.plan.dp > 1:
        # the algorithm the model runs for a full bucket, moving the whole gradient on that level
        algorithm = allreduce.choice(float(scenario.ddp.bucket_cap)).algorithm.value
        traffic = level_bytes(allreduce, level, grad, algorithm)
        eff = (links.intra_bandwidth / links.intra_line_rate if level == "intra"
               else links.inter_bandwidth / links.inter_line_rate)
        closed = {"algorithm": algorithm, "bytes": traffic, "compute": traffic / (est.compute * eff),
                  "backward": traffic / (backward_share * est.compute * eff)}
    now = links.intra_line_rate if level == "intra" else links.inter_line_rate
    gbps = lambda x: None if x is None else x * 8 / 1e9  # noqa: E731
    return {
        "nodes": cluster.nodes, "gpus": cluster.gpus, "params": est.params,
        "global_batch": est.global_batch, "compute_s": est.compute,
        "link": _LEVEL_LINK[req.level or level],
        "current_bandwidth_Gbps": gbps(req.now if req.level == "measured" else now),
        "required_bandwidth_Gbps": gbps(req.needed),
        "closed_form_algorithm": closed["algorithm"],
        "closed_form_bytes_per_step": closed["bytes"],
        "comms_within_compute_Gbps": gbps(closed["compute"]),
        "comms_within_backward_Gbps": gbps(closed["backward"]),
        "article_001_rule_Gbps": float(article_001_rule(cluster.nodes, est.params)) * 8 / 1e9
        if cluster.nodes > 1 else None,
        "exposed_share_now": req.share_now,
        "exposed_share_at_required": req.share_at,
        "enough": (req.needed is not None and req.factor <= 1.0) or (
            req.level is None and req.share_now <= max_exposed_share),
        "limited_by": req.limited_by,
        "bottleneck": est.bottleneck.resource,
    }


_SHORT_LINK = {"inter-node, per node": "per node", "intra-node, per GPU": "per GPU",
               "measured all-reduce": "measured"}


def run(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.cli.scale import compact_table
    from willitscale.plan.scaling import parse_nodes
    from willitscale.scenario.build import build_scenario
    from willitscale.units import format_count, parse_count

    settings = settings_from_args(args, skip=("nodes", "params"))
    nodes = parse_nodes(args.nodes or settings.get("nodes", 1))
    params_list = ([parse_count(p.strip(), field="--params") for p in args.params.split(",")]
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
        f"Least bandwidth for exposed communication <= {args.max_exposed_share * 100:.3g}% of the step",
        (("params", ""), ("nodes", ""), ("link", ""), ("now", "Gb/s"), ("needed", "Gb/s"),
         ("comms<=", "compute"), ("comms<=", "backward"), ("article", "rule"),
         ("exposed", "now"), ("enough", "")),
        [(format_count(r["params"]), r["nodes"], _SHORT_LINK[r["link"]],
          gbps(r["current_bandwidth_Gbps"]),
          gbps(r["required_bandwidth_Gbps"]) if r["required_bandwidth_Gbps"] is not None
          else r["limited_by"], gbps(r["comms_within_compute_Gbps"]),
          gbps(r["comms_within_backward_Gbps"]), gbps(r["article_001_rule_Gbps"]),
          f"{100 * r['exposed_share_now']:.0f}%", "yes" if r["enough"] else "no") for r in rows],
        caption="Line rates, one direction, of the link that limits the all-reduce: per node (all "
                "NICs) when the NICs do, per GPU when the link inside the node does (PCIe, an "
                "H800's NVLink, a tree's chain). needed: the full model (buckets, overlap, the "
                "model's NCCL-like algorithm choice) by bisection, the same criterion as the "
                "estimate's bottleneck; comms<=compute / <=backward: closed forms, bandwidth-bound, "
                "with the bytes the chosen algorithm (ring or tree) moves on that link; 'Will it "
                "scale' rule: N x P GB/s (docs/reproductions.md). 'intra'/'inter' under needed: "
                "that link limits next, 'latency': no bandwidth is enough")
    return 0
