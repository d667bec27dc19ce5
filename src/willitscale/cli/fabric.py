"""``willitscale fabric``: build and show topologies, size them, simulate traffic on them.

    willitscale fabric build rail-optimized --nodes 16 --oversubscription 4 [--save topo.json]
    willitscale fabric show topo.json [--links]
    willitscale fabric sizes --radix 128
    willitscale fabric simulate --topology rail-optimized --nodes 16 --collective all_reduce \\
        --size 1GB --routing spray [--seeds 1-10] [--jobs 2] [--incast 8] [--step --tp 8 ...]
"""

from __future__ import annotations

import argparse

from willitscale.cli.paths import output_file
from willitscale.cli.plot_flag import add_plot_flag
from willitscale.errors import ConfigError

KINDS = ("rail-optimized", "rail-only", "fat-tree", "dragonfly", "torus", "nvswitch")


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser(
        "fabric", help="what traffic really gets on a shared fabric: link loads, ECMP collisions, incast",
        description="What does a collective really get when its flows share a fabric? Topologies "
                    "as data (rail-optimized, rail-only, fat-tree, dragonfly, torus, one NVSwitch "
                    "node) and a flow-level simulator: every flow routed (ECMP, spraying, "
                    "adaptive, rail), links shared max-min fairly, link loads, collisions, "
                    "incast and jobs side by side. docs/fabric.md.",
        epilog=examples("willitscale fabric simulate --topology rail-optimized --nodes 16 --size 1GB",
                        "willitscale fabric build fat-tree --k 16 --save ft.json",
                        "willitscale fabric sizes --radix 64"))
    sub = p.add_subparsers(dest="fabric_command", metavar="SUBCOMMAND")
    b = sub.add_parser("build", help="build a topology and print its links and sizes",
                       description="What does this topology contain? Its servers, switches and "
                                   "links with their capacity and latency; --save keeps the spec "
                                   "for show and simulate --topology-file.",
                       epilog=examples("willitscale fabric build rail-optimized --nodes 4 "
                                       "--gpus-per-node 8",
                                       "willitscale fabric build fat-tree --k 16 --oversubscription 4 "
                                       "--save ft.json"))
    b.add_argument("kind", choices=KINDS)
    _topology_args(b)
    b.add_argument("--save", metavar="FILE", type=output_file("--save"), help="write the topology spec as JSON (for show / --topology-file)")
    b.add_argument("--json", action="store_true")
    b.set_defaults(run=run_build)
    s = sub.add_parser("show", help="show a saved topology (from build --save)",
                       description="What is in a topology saved by fabric build --save?",
                       epilog=examples("willitscale fabric show ft.json",
                                       "willitscale fabric show ft.json --links --json"))
    s.add_argument("file")
    s.add_argument("--links", action="store_true", help="list every directed link")
    s.add_argument("--json", action="store_true")
    s.set_defaults(run=run_show)
    z = sub.add_parser("sizes", help="the largest cluster each topology builds from a switch radix",
                       description="How large a cluster can each topology build from switches of "
                                   "this many ports, and with how many switches?",
                       epilog=examples("willitscale fabric sizes",
                                       "willitscale fabric sizes --radix 64 --oversubscription 3"))
    z.add_argument("--radix", type=int, default=128)
    z.add_argument("--gpus-per-node", type=int, default=8)
    z.add_argument("--oversubscription", type=float, default=1.0,
                   help="downlink:uplink capacity at the leaf (a dragonfly router: GPU ports:global links)")
    z.add_argument("--top-oversubscription", type=float, default=1.0,
                   help="downlink:uplink capacity at the middle tier of 3-tier kinds (the article's 28K "
                   "cluster: 7)")
    z.add_argument("--json", action="store_true")
    z.set_defaults(run=run_sizes)
    m = sub.add_parser("simulate", help="simulate a collective, several jobs, incast or a training step",
                       description="How long does this traffic take on this fabric, and where do "
                                   "flows collide? A collective (or several jobs, an incast, a "
                                   "training step's TP/CP/EP/PP/DP traffic) routed flow by flow "
                                   "and shared max-min fairly; completion time, busbw, the hottest "
                                   "links and the load on every link.",
                       epilog=examples(
                           "willitscale fabric simulate --topology rail-optimized --nodes 16 "
                           "--size 1GB --plot figs",
                           "willitscale fabric simulate --topology fat-tree --k 16 "
                           "--oversubscription 4 --routing ecmp --seeds 1-10",
                           "willitscale fabric simulate --nodes 8 --jobs 2 --job-layout interleaved",
                           "willitscale fabric simulate --nodes 4 --incast 16 --size 64MB"))
    m.add_argument("--topology", choices=KINDS, default="rail-optimized")
    m.add_argument("--topology-file", metavar="FILE", help="a spec saved by fabric build --save")
    _topology_args(m)
    _traffic_args(m)
    m.add_argument("--json", action="store_true")
    add_plot_flag(m)
    m.set_defaults(run=run_simulate)
    p.set_defaults(run=lambda args: p.print_help() or 0)


def _topology_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("topology")
    g.add_argument("--nodes", type=int, help="servers (default 16 where it applies)")
    g.add_argument("--gpus-per-node", type=int, help="GPUs per server = rails (default 8)")
    g.add_argument("--radix", type=int, help="switch ports (default 128)")
    g.add_argument("--oversubscription", type=float, help="downlink:uplink capacity at the leaf (default 1)")
    g.add_argument("--top-oversubscription", type=float,
                   help="fat-tree --tiers 3: downlink:uplink capacity at the aggregation tier (default 1)")
    g.add_argument("--spines", type=int)
    g.add_argument("--k", type=int, help="fat-tree switch radix")
    g.add_argument("--tiers", type=int, help="fat-tree tiers: 2 or 3")
    g.add_argument("--groups", type=int, help="dragonfly groups")
    g.add_argument("--routers-per-group", type=int)
    g.add_argument("--global-links", type=int, help="dragonfly global links per router")
    g.add_argument("--nodes-per-router", type=int)
    g.add_argument("--dims", help="torus size, e.g. 4x4x4")
    g.add_argument("--node", help="a catalog node preset (e.g. dgx-h100): GPUs per node, NVLink and NICs")
    g.add_argument("--nic", help="NIC per GPU: a bandwidth, one direction (default 400Gbps), or a catalog "
                   "link (ib-ndr, roce-400g, ...)")
    g.add_argument("--nvlink", help="NVLink per GPU: a bandwidth, one direction (default 450GB/s), or a "
                   "catalog link (nvlink4, ...)")
    g.add_argument("--advertised", action="store_true",
                   help="catalog links at their advertised rate (default: x their achievable efficiency)")
    g.add_argument("--uplink", help="switch-to-switch link bandwidth (default: as --nic)")
    g.add_argument("--nic-latency", help="end to end through one switch (default 2.7us)")
    g.add_argument("--nvlink-latency", help="GPU to GPU over NVLink (default 0.6us)")
    g.add_argument("--switch-latency", help="added per switch-to-switch hop (default 0.5us)")


def _traffic_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("traffic")
    g.add_argument("--collective", default="all_reduce", help="all_reduce, all_gather, reduce_scatter, "
                   "all_to_all, broadcast, reduce, send_recv")
    g.add_argument("--size", default="1GB",
                   help="bytes per rank, nccl-tests convention; with --incast bytes per sender (default 1GB)")
    g.add_argument("--algorithm", help="ring, tree, hierarchical (all_reduce); direct, pairwise (all_to_all)")
    g.add_argument("--placement", choices=("rail", "flat"), default="rail",
                   help="ring order over servers: rail (hops stay on a rail) or flat (GPU index order)")
    g.add_argument("--channels", type=int, help="rings (NCCL channels); default one per GPU of a server")
    g.add_argument("--routing", default="ecmp", help="ecmp, spray, adaptive or rail (PXN + ECMP)")
    g.add_argument("--pxn", action="store_true", help="rail-aware: cross-rail data moves over NVLink first")
    g.add_argument("--seed", type=int, default=0, help="ECMP hash seed")
    g.add_argument("--seeds", help="several seeds: 1-10 or 1,4,7; reports mean and worst")
    g.add_argument("--workers", type=int, default=1,
                   help="with --seeds: run the seeds on this many worker processes "
                        "(the pool of `willitscale sweep`; default 1, in this process)")
    g.add_argument("--jobs", type=int, default=1, help="equal jobs on the servers, each running the collective")
    g.add_argument("--job-layout", choices=("packed", "interleaved"), default="packed")
    g.add_argument("--incast", type=int, metavar="N", help="N GPUs on other servers all send --size to GPU 0")
    g.add_argument("--step", action="store_true", help="one training step's TP/CP/EP/PP/DP traffic")
    g.add_argument("--order", default="tp,cp,ep,dp,pp",
                   help="with --step: rank nesting, innermost first (default Megatron-LM's tp,cp,ep,dp,pp; "
                   "tp,cp,ep,pp,dp keeps a model copy on neighbouring servers and spreads DP widest)")
    about = {"dp": "DP degree: every data-parallel replica, the EP ranks among them, as in estimate",
             "ep": "EP degree: a divisor of --dp (experts are split over data-parallel ranks)"}
    for d in ("tp", "cp", "ep", "dp", "pp"):
        g.add_argument(f"--{d}", type=int, default=1,
                       help=about.get(d, f"{d.upper()} degree") + " (with --step)")
        g.add_argument(f"--{d}-bytes", default="0", help=f"bytes per {d.upper()} operation per GPU")
        if d != "dp":
            g.add_argument(f"--{d}-count", type=int, default=1, help=f"{d.upper()} operations per step")
    g.add_argument("--no-reuse", action="store_true", help="simulate every step (no exact phase reuse)")
    g.add_argument("--fidelity", choices=("auto", "exact", "coarse"), default="auto",
                   help="exact: re-solve the rates at every flow's finish; coarse: only when steps start "
                        "(finished flows' bandwidth waits for the next start; docs/fabric.md 'Speed' gives "
                        "its error); auto (default): coarse above 16,384 GPUs")


# ---------------------------------------------------------------------------------- helpers
def _links(args):
    from willitscale.topology.links import FabricLinks
    from willitscale.units import parse_bandwidth, parse_time

    effective = not args.advertised
    kw = {}
    if args.node:
        from willitscale.hardware import get_node

        node = get_node(args.node)
        base = FabricLinks.from_node(node, effective=effective)
        kw = {k: getattr(base, k) for k in ("nic_bandwidth", "nic_latency", "nic_name", "nvlink_bandwidth",
                                            "nvlink_latency", "nvlink_name")}
    for flag, key in (("nic", "nic_bandwidth"), ("nvlink", "nvlink_bandwidth"), ("uplink", "uplink_bandwidth")):
        v = getattr(args, flag)
        if v is None:
            continue
        if flag != "uplink" and not str(v).strip()[:1].isdigit():  # a catalog link name
            from willitscale.hardware import get_link

            link = get_link(v)
            one = FabricLinks.from_links(**{flag: link}, effective=effective)
            kw.update({k: getattr(one, k) for k in (f"{flag}_bandwidth", f"{flag}_latency", f"{flag}_name")})
            continue
        kw[key] = parse_bandwidth(v, field=f"--{flag}")
        if flag != "uplink":
            kw[f"{flag}_name"] = f"given: {v}"
    for flag in ("nic_latency", "nvlink_latency", "switch_latency"):
        v = getattr(args, flag)
        if v is not None:
            kw[flag] = parse_time(v, field="--" + flag.replace("_", "-"))
    return FabricLinks(**kw)


_DEFAULTS = {"nodes": 16, "gpus_per_node": 8}


def _spec(args, kind: str):
    from willitscale.topology.spec import KIND_PARAMS, TopologySpec

    if getattr(args, "topology_file", None):
        return TopologySpec.load(args.topology_file)
    params = {}
    for name in ("nodes", "gpus_per_node", "radix", "oversubscription", "top_oversubscription", "spines", "k",
                 "tiers", "groups", "routers_per_group", "global_links", "nodes_per_router", "dims"):
        v = getattr(args, name)
        if v is not None:
            params[name] = _dims(v) if name == "dims" else v
        elif name == "gpus_per_node" and args.node and name in KIND_PARAMS.get(kind, ()):
            from willitscale.hardware import get_node

            params[name] = get_node(args.node).gpus_per_node
        elif name in _DEFAULTS and name in KIND_PARAMS.get(kind, ()) and not (kind == "fat-tree" and name == "nodes"):
            params[name] = _DEFAULTS[name]
    return TopologySpec(kind=kind, params=params, links=_links(args))


def _dims(text: str) -> tuple[int, ...]:
    try:
        return tuple(int(x) for x in str(text).lower().split("x"))
    except ValueError:
        raise ConfigError("--dims", text, "sizes joined by x, such as 4x4 or 4x4x4") from None


def _seeds(text: str) -> list[int]:
    out: list[int] = []
    try:
        for part in str(text).split(","):
            if "-" in part.strip()[1:]:
                a, b = part.split("-", 1)
                out += list(range(int(a), int(b) + 1))
            else:
                out.append(int(part))
    except ValueError:
        raise ConfigError("--seeds", text, "seeds such as 1-10 or 1,4,7") from None
    if not out:
        raise ConfigError("--seeds", text, "at least one seed")
    return out


def _summary_rows(topo) -> list[list]:
    return [[r["tier"], r["links"], f"{r['capacity_GBps']:g}", f"{r['latency_us']:g}",
             f"{r['total_capacity_TBps']:.3g}"] for r in topo.tier_summary()]


def _print_topology(topo, file=None) -> None:
    from rich.markup import escape

    from willitscale.cli.output import console, print_table

    params = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in topo.params.items())
    print_table(f"{topo.kind}: {topo.gpus} GPUs on {topo.nodes} server(s), {topo.switches} switches",
                ["tier", "directed links", "capacity", "latency", "total"], _summary_rows(topo),
                units=["", "", "GB/s each way", "us", "TB/s"], caption=params, file=file)
    for a in topo.assumptions:
        console(file).print(f"[dim]assumption:[/dim] {escape(a)}")


# ---------------------------------------------------------------------------------- commands
def run_build(args) -> int:
    from willitscale.cli.output import print_json

    spec = _spec(args, args.kind)
    topo = spec.build()
    if args.save:
        spec.save(args.save)
    if args.json:
        print_json({**topo.to_json(), "spec": spec.to_json()})
    else:
        _print_topology(topo)
        if args.save:
            print(f"saved to {args.save}")
    return 0


def run_show(args) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.topology.spec import TopologySpec

    topo = TopologySpec.load(args.file).build()
    links = [{"link": topo.link_name(e), "tier": topo.tiers[topo.link_tier[e]],
              "capacity_GBps": float(topo.link_capacity[e]) / 1e9,
              "latency_us": float(topo.link_latency[e]) * 1e6} for e in range(topo.links)] if args.links else []
    if args.json:
        print_json({**topo.to_json(), **({"links": links} if args.links else {})})
        return 0
    _print_topology(topo)
    if links:
        print_table("links", ["link", "tier", "capacity", "latency"],
                    [[x["link"], x["tier"], f"{x['capacity_GBps']:g}", f"{x['latency_us']:g}"] for x in links],
                    units=["", "", "GB/s", "us"])
    return 0


def run_sizes(args) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.topology.sizing import max_clusters

    rows = max_clusters(radix=args.radix, gpus_per_node=args.gpus_per_node,
                        oversubscription=args.oversubscription, top_oversubscription=args.top_oversubscription)
    if args.json:
        print_json({"radix": args.radix, "gpus_per_node": args.gpus_per_node, "clusters": rows})
        return 0
    ratios = "".join(f", {r:g}:1 {where}" for r, where in ((args.oversubscription, "at the leaf"),
                                                          (args.top_oversubscription, "at the middle tier"))
                     if r != 1)
    print_table(f"largest cluster from {args.radix}-port switches, {args.gpus_per_node}-GPU servers{ratios}",
                ["topology", "GPUs", "switches", "how"], [[r.kind, f"{r.gpus:,}" if r.gpus else "-",
                                                           f"{r.switches:,}" if r.gpus else "-", r.how]
                                                          for r in rows])
    return 0


def run_simulate(args) -> int:
    from willitscale.cli.output import print_json
    from willitscale.units import parse_size

    if args.jobs < 1:
        raise ConfigError("--jobs", args.jobs, "an integer >= 1 (1: the collective alone)")
    if args.workers < 1:
        raise ConfigError("--workers", args.workers, "an integer >= 1")
    if args.incast is not None and args.incast < 1:
        raise ConfigError("--incast", args.incast, "an integer >= 1: the GPUs sending to GPU 0")
    spec = _spec(args, args.topology)
    topo = spec.build()
    seeds = _seeds(args.seeds) if args.seeds else [args.seed]
    size = parse_size(args.size, field="--size", unit_required=True)
    if sum(bool(x) for x in (args.incast, args.step, args.jobs > 1)) > 1:
        raise ConfigError("choose one of --incast, --step and --jobs")
    if args.incast or args.step or args.jobs > 1:
        out = _simulate_streams(args, topo, size, seeds)
    else:
        out = _simulate_collective(args, topo, size, seeds)
    result = out.pop("_result")
    if args.plot:
        from willitscale.cli.plot_flag import fabric_plots

        fabric_plots(args.plot, result)
    out = {"topology": {k: v for k, v in topo.to_json().items() if k not in ("tiers", "assumptions")}, **out,
           "assumptions": list(topo.assumptions)}
    if args.json:
        print_json(out)
    else:
        _print_simulation(out)
    return 0


def _routing(args, seed):
    from willitscale.topology.routing import parse_routing

    return parse_routing(args.routing, seed=seed, pxn=args.pxn)


def _simulate_collective(args, topo, size, seeds) -> dict:
    from willitscale.fabric.collective import simulate_collective, sweep_seeds
    from willitscale.fabric.report import traffic_matrix

    def run(seed):
        return simulate_collective(topo, args.collective, size, routing=_routing(args, seed),
                                   algorithm=args.algorithm, placement=args.placement,
                                   channels=args.channels, reuse_phases=not args.no_reuse,
                                   fidelity=args.fidelity)

    if len(seeds) == 1:
        rep = run(seeds[0])
        out = rep.to_json()
    else:
        sweep = _seeds_on_pool(args, size, seeds) if args.workers > 1 else sweep_seeds(run, seeds)
        rep = sweep.worst
        if rep.result is None:  # from a worker: its simulation stayed there; run the worst again here
            rep = run(rep.routing.seed)
        out = {"op": rep.call.op.value, "size_bytes": size, "ranks": rep.call.ranks,
               "routing": rep.routing.name, **sweep.to_json()}
    out["traffic_matrix"] = traffic_matrix(rep.result.traffic, topo).to_json()
    out.update(_fidelity(rep.result))
    out["_result"] = rep.result  # for --plot; run_simulate takes it out
    return out


def _seeds_on_pool(args, size, seeds):
    """The seed sweep of a collective, one seed per task on ``args.workers`` processes. The
    reports come back without their simulation (it holds the whole topology): the same numbers."""
    from willitscale.fabric.collective import SeedSweep
    from willitscale.sweep.runner import map_on_pool

    return SeedSweep(tuple(map_on_pool(_seed_report, [(args, size, s) for s in seeds], args.workers)))


_TOPOLOGIES: dict = {}  # a worker's topology, built once per process


def _seed_report(task):
    """One seed's :class:`CollectiveReport`, without its simulation (run in a worker process)."""
    from dataclasses import replace

    from willitscale.fabric.collective import simulate_collective

    args, size, seed = task
    key = repr(sorted((k, v) for k, v in vars(args).items() if k != "run"))
    if key not in _TOPOLOGIES:
        _TOPOLOGIES.clear()
        _TOPOLOGIES[key] = _spec(args, args.topology).build()
    rep = simulate_collective(_TOPOLOGIES[key], args.collective, size, routing=_routing(args, seed),
                              algorithm=args.algorithm, placement=args.placement,
                              channels=args.channels, reuse_phases=not args.no_reuse, fidelity=args.fidelity)
    return replace(rep, result=None)


def _step_traffic(args, topo, size):
    from willitscale.fabric.step import ParallelLayout, StepComm, step_traffic
    from willitscale.fabric.traffic import incast_traffic, jobs_traffic
    from willitscale.units import parse_size

    if args.incast:
        g = topo.gpus_per_node
        if not 1 <= args.incast < topo.nodes:
            raise ConfigError("--incast", args.incast, f"1 to {topo.nodes - 1} senders (one per other server)")
        return incast_traffic([n * g for n in range(1, args.incast + 1)], 0, size)
    if args.jobs > 1:
        return jobs_traffic(topo, args.jobs, args.collective, size, layout=args.job_layout,
                            algorithm=args.algorithm, placement=args.placement, channels=args.channels)
    order = tuple(x.strip().lower() for x in str(args.order).split(","))
    layout = ParallelLayout(tp=args.tp, cp=args.cp, ep=args.ep, dp=args.dp, pp=args.pp, order=order)
    kw = {f"{d}_bytes": parse_size(getattr(args, f"{d}_bytes"), field=f"--{d}-bytes") for d in
          ("tp", "cp", "ep", "pp", "dp")}
    kw.update({f"{d}_count": getattr(args, f"{d}_count") for d in ("tp", "cp", "ep", "pp")})
    return step_traffic(topo, layout, StepComm(**kw), channels=args.channels or 1,
                        algorithm=args.algorithm)


def _simulate_streams(args, topo, size, seeds) -> dict:
    import numpy as np

    from willitscale.fabric.report import link_report, traffic_matrix

    traffic = _step_traffic(args, topo, size)
    if len(seeds) > 1 and args.workers > 1:
        from dataclasses import replace

        from willitscale.sweep.runner import map_on_pool

        per_seed = [(seed, replace(res, topology=topo, traffic=traffic), alone) for seed, res, alone in
                    map_on_pool(_streams_seed, [(args, size, s) for s in seeds], args.workers)]
    else:
        per_seed = [_streams_of_seed(args, topo, traffic, seed) for seed in seeds]
    times = np.array([r.completion_time for _, r, _ in per_seed])
    seed, res, alone = per_seed[int(np.argmax(times))]
    streams = [{"stream": s.name, "bytes": s.bytes, "time_s": res.stream_times[s.name],
                "alone_time_s": alone[s.name], "slowdown": res.stream_times[s.name] / alone[s.name]
                if alone[s.name] > 0 else 1.0} for s in traffic.streams]
    out = {"traffic": "incast" if args.incast else "step" if args.step else "jobs",
           "routing": res.routing.name, "seeds": seeds, **({"worst_seed": seed} if len(seeds) > 1 else {}),
           "completion_time_s": {"mean": float(times.mean()), "worst": float(times.max())}
           if len(seeds) > 1 else float(times[0]),
           "streams": streams, **_fidelity(res), **link_report(res).to_json(),
           "traffic_matrix": traffic_matrix(traffic, topo).to_json(), "_result": res}
    if args.incast:
        out["incast"] = _incast_summary(topo, traffic, res, seed, args)
    return out


def _streams_of_seed(args, topo, traffic, seed):
    """``(seed, simulation, each stream's time alone)`` of the streams under one routing seed."""
    from willitscale.collectives.phases import Traffic
    from willitscale.fabric.simulator import PhaseRoutes, simulate

    routing = _routing(args, seed)
    routes = PhaseRoutes(topo)  # the streams alone reuse the phases' routes
    res = simulate(topo, traffic, routing, reuse_phases=not args.no_reuse, fidelity=args.fidelity, routes=routes)
    alone = {s.name: simulate(topo, Traffic([s]), routing, fidelity=args.fidelity, routes=routes).completion_time
             for s in traffic.streams} \
        if len(traffic.streams) > 1 else {s.name: res.completion_time for s in traffic.streams}
    return seed, res, alone


def _streams_seed(task):
    """:func:`_streams_of_seed` in a worker process: the simulation comes back without its
    topology and traffic (the parent has them; the rest are the same numbers)."""
    from dataclasses import replace

    args, size, seed = task
    key = repr(sorted((k, v) for k, v in vars(args).items() if k != "run"))
    if key not in _TOPOLOGIES:
        _TOPOLOGIES.clear()
        _TOPOLOGIES[key] = _spec(args, args.topology).build()
    topo = _TOPOLOGIES[key]
    seed, res, alone = _streams_of_seed(args, topo, _step_traffic(args, topo, size), seed)
    return seed, replace(res, topology=None, traffic=None), alone


def _fidelity(res) -> dict:
    """Which fidelity the simulation ran and why (the simulator's choice under ``auto``)."""
    return {"fidelity": res.fidelity, "fidelity_reason": res.fidelity_reason}


def _incast_summary(topo, traffic, res, seed, args) -> dict:
    """The incast in numbers: fan-in, what one sender alone takes, the slowdown, the receiver link."""
    from willitscale.collectives.phases import Phase, Stream, Traffic
    from willitscale.fabric.simulator import simulate

    phase = traffic.streams[0].phases[0]
    one = Traffic([Stream(name="one", phases=(Phase(src=phase.src[:1], dst=phase.dst[:1],
                                                    size=phase.size[:1]),))])
    alone = simulate(topo, one, _routing(args, seed)).completion_time
    return {"senders": int(phase.flows), "receiver": topo.vertex_names[topo.gpu_vertex[int(phase.dst[0])]],
            "bytes_per_sender": float(phase.size[0]), "one_sender_time_s": alone,
            "slowdown_vs_one_sender": res.completion_time / alone if alone > 0 else 1.0,
            "per_sender_GBps": float(phase.size[0]) / res.completion_time / 1e9}


def _print_simulation(out: dict) -> None:
    from rich.markup import escape

    from willitscale.cli.output import console, print_table
    from willitscale.units import format_time

    t = out["completion_time_s"]
    c = console()
    topo = out["topology"]
    c.print(f"[bold]{escape(str(topo['kind']))}[/bold]: {topo['gpus']} GPUs on {topo['nodes']} "
            f"servers, routing {escape(str(out.get('routing')))}")
    if isinstance(t, dict):
        c.print(f"completion time: mean {format_time(t['mean'])}, worst {format_time(t['worst'])} "
                f"over seeds {out['seeds'][0]}..{out['seeds'][-1]}")
        hot = out.get("hottest_link_flows")
        if hot:
            c.print(f"worst seed {out['worst_seed']}: hottest link {hot['worst_seed_link']} carried "
                    f"{hot['worst_seed_flows']} flows at once (mean over seeds {hot['mean']:g})")
    else:
        c.print(f"completion time: {format_time(t)}")
    if "fidelity" in out:
        c.print(f"fidelity: {out['fidelity']} ({escape(out['fidelity_reason'])})")
    if "busbw_GBps" in out and not isinstance(out["busbw_GBps"], dict):
        c.print(f"algbw {out['algbw_GBps']:.1f} GB/s, busbw {out['busbw_GBps']:.1f} GB/s "
                f"({out['op']}, {out['ranks']} ranks, {out['algorithm']}, {out['channels']} channel(s))")
    inc = out.get("incast")
    if inc:
        c.print(f"incast: {inc['senders']} senders x {inc['bytes_per_sender'] / 1e9:g} GB into {inc['receiver']}: "
                f"{inc['slowdown_vs_one_sender']:.2f}x the {format_time(inc['one_sender_time_s'])} of one sender "
                f"alone; each sender gets {inc['per_sender_GBps']:.3g} GB/s")
    if len(out.get("streams", ())) > 1:
        print_table("streams", ["stream", "time", "alone", "slowdown"],
                    [[s["stream"], format_time(s["time_s"]), format_time(s["alone_time_s"]),
                      f"{s['slowdown']:.2f}x"] for s in out["streams"]])
    which = "" if not isinstance(t, dict) else " (mean over seeds)" if "per_seed" in out else \
        f" (worst seed {out['worst_seed']})"
    c.print(f"fabric links{which}: max utilisation {out['max_link_utilization']:.1%}, "
            f"mean {out['mean_link_utilization']:.1%}")
    if out.get("hottest_links"):
        print_table("hottest links", ["link", "tier", "utilisation", "flows at once"],
                    [[h["link"], h["tier"], f"{h['utilization']:.1%}", h["peak_flows"]]
                     for h in out["hottest_links"]])
    tm = out.get("traffic_matrix")
    if tm:
        c.print(f"GPU pairs carrying traffic: {tm['gpu_pairs_with_traffic']:,} of {tm['gpu_pairs']:,} "
                f"({1 - tm['idle_gpu_pair_share']:.2%}); idle {tm['idle_gpu_pair_share']:.2%}")
        by, share = tm.get("gpu_pairs_with_traffic_by_placement"), tm.get("byte_share_by_placement")
        if by:
            c.print(f"  {by['same_server']:,} inside servers, {by['same_rail']:,} on one rail, "
                    f"{by['cross_rail']:,} across rails ({share['cross_rail']:.1%} of the bytes)")
    for a in out["assumptions"]:
        c.print(f"[dim]assumption:[/dim] {escape(a)}")
