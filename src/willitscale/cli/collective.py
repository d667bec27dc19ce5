"""``willitscale collective OP``: one collective's time, bandwidth and traffic under each algorithm."""

from __future__ import annotations

HELP = "how long one collective takes under each algorithm; its algbw and busbw"

DESCRIPTION = """\
How long does one collective take, under which algorithm, and what busbw does that make?
Three backends (--backend): nccl (the default with --node): the (algorithm, protocol) NCCL
picks by its own tuning model (Ring, Tree, NVLS, NVLSTree, CollNetDirect, CollNetChain, PAT x
LL, LL128, Simple), the runners-up, and the time the pick achieves; gloo: what PyTorch's Gloo
runs (rings over TCP); alpha-beta (the default without --node): the textbook cost of every
algorithm that can run the op, and which is fastest. --size follows nccl-tests: all_gather's
gathered output, reduce_scatter's input, all_to_all's per-rank send buffer; several sizes,
comma-separated, give one row each. Bandwidths are one direction (200Gbps = 25 GB/s). With no
link given a named default is used and the output says so. Formulas and sources:
docs/collectives.md."""


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser("collective", help=HELP, description=DESCRIPTION, epilog=examples(
        "willitscale collective all_reduce --size 1GB --ranks 64 --node dgx-h100",
        "willitscale collective all_reduce --size 4MiB,64MiB,1GiB --ranks 8 --node dgx-a100 --json",
        "willitscale collective all_reduce --size 25MB --ranks 16 --node p5 --algorithm nvlstree",
        "willitscale collective all_gather --size 256MB --ranks 8 --link nvlink4",
        "willitscale collective all_reduce --size 97.5MB --ranks 256 --bandwidth 400Gbps "
        "--latency 5us --algorithm ring"))
    p.add_argument("op", help="all_reduce, reduce_scatter, all_gather, broadcast, reduce, all_to_all or send_recv")
    p.add_argument("--size", required=True, help="bytes, e.g. 1GB, 97.5MB, 64MiB (nccl-tests convention)")
    p.add_argument("--ranks", required=True, help="number of ranks (GPUs), e.g. 8 or 256")
    p.add_argument("--bandwidth", help="per-rank one-direction bandwidth, e.g. 100GB/s or 400Gbps "
                   "(with --ranks-per-node: each rank's intra-node bandwidth)")
    p.add_argument("--latency", help="per-hop latency, e.g. 5us or 0 (with --ranks-per-node: intra-node)")
    p.add_argument("--backend", choices=("nccl", "gloo", "alpha-beta"),
                   help="nccl (default with --node), gloo, or alpha-beta (default without --node)")
    p.add_argument("--algorithm", default=None,
                   help="nccl: Ring, Tree, NVLS, NVLSTree, CollNetDirect, CollNetChain, PAT (as "
                   "NCCL_ALGO, any case); alpha-beta: ring, binary_tree, double_binary_tree, "
                   "halving_doubling, parameter_server, naive, direct, hierarchical, or all "
                   "(default: all applicable, fastest marked)")
    p.add_argument("--protocol", help="with --backend nccl: LL, LL128 or Simple (as NCCL_PROTO)")
    p.add_argument("--gpus-per-process", help="with --backend nccl: GPUs one process drives "
                   "(nccl-tests -g; default 1, as torchrun)")
    p.add_argument("--nccl-env", action="append", metavar="KEY=VALUE",
                   help="with --backend nccl: an NCCL environment setting the model applies, as NCCL "
                   "does (repeatable): NCCL_ALGO, NCCL_PROTO, NCCL_MIN_CTAS, NCCL_MAX_CTAS, "
                   "NCCL_MIN_NCHANNELS, NCCL_MAX_NCHANNELS and the p2p ones (docs/collectives.md); "
                   "any other key is refused")
    p.add_argument("--sharp", action="store_true", help="with --backend nccl: in-network reduction "
                   "on InfiniBand (SHARP via CollNet, NCCL_COLLNET_ENABLE=1)")
    p.add_argument("--device", choices=("cuda", "cpu"), help="with --backend gloo: where the "
                   "tensors live (cuda stages them through host memory; default cuda with --node)")
    p.add_argument("--link", help="a catalog link as the one level, e.g. ib-ndr, nvlink4, roce-400g "
                   "(its achievable bandwidth and latency; `willitscale hardware list --kind link`)")
    p.add_argument("--node", help="a catalog node preset as the two levels, e.g. dgx-h100, p4d "
                   "(its NVLink per GPU inside, its NICs across; `willitscale hardware list --kind node`)")
    two = p.add_argument_group("two levels (ranks grouped in nodes)")
    two.add_argument("--ranks-per-node", help="ranks per node, e.g. 8")
    two.add_argument("--inter-bandwidth", help="one node's one-direction bandwidth to other nodes, all NICs "
                     "together, e.g. 8x400Gbps or 400GB/s")
    two.add_argument("--inter-latency", help="per-hop latency between nodes, e.g. 5us")
    p.add_argument("--calibration", default=None, metavar="FILE",
                   help="with --backend nccl or gloo: a measured profile whose [[collective]] entries "
                        "(willitscale calibrate) give the measured time of the pairs (NCCL) or the "
                        "op (Gloo) they measured on this geometry (gloo: with --node or "
                        "--ranks-per-node)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def _ranks(text: str, field: str) -> int:
    from willitscale.errors import ConfigError
    from willitscale.hardware.model import MAX_GPUS
    from willitscale.units import parse_count

    value = parse_count(text, field=field)
    if value < 1 or value != int(value) or value > MAX_GPUS:
        raise ConfigError(field, text, f"an integer from 1 to {MAX_GPUS:,} (2^20 ranks, about ten "
                                       "times today's largest training clusters)")
    return int(value)


def build_network(args) -> tuple[object, list[str]]:
    """The network from the flags, and the assumptions made for what was not given."""
    from willitscale.collectives.network import (
        DEFAULT_INTRA_LATENCY,
        DEFAULT_LINK,
        Hierarchy,
        LinkCost,
    )
    from willitscale.errors import ConfigError
    from willitscale.units import (
        format_bandwidth,
        format_time,
        parse_bandwidth,
        parse_ports,
        parse_time,
    )

    notes: list[str] = []
    if args.link is not None or args.node is not None:
        return _catalog_network(args)
    if args.ranks_per_node is None:
        for flag in ("inter_bandwidth", "inter_latency"):
            if getattr(args, flag) is not None:
                raise ConfigError(f"--{flag.replace('_', '-')} needs --ranks-per-node (the ranks that share a node)")
        if args.bandwidth is None and args.latency is None:
            notes.append(f"no link given: using the {DEFAULT_LINK.name}")
            return DEFAULT_LINK, notes
        bandwidth = DEFAULT_LINK.bandwidth
        if args.bandwidth is None:
            notes.append(f"no --bandwidth given: assuming {format_bandwidth(bandwidth)} (the default link's)")
        else:
            bandwidth = parse_bandwidth(args.bandwidth, field="--bandwidth")
        latency = DEFAULT_LINK.latency
        if args.latency is None:
            notes.append(f"no --latency given: assuming {format_time(latency)} per hop (the default link's)")
        else:
            latency = parse_time(args.latency, field="--latency")
        return LinkCost(bandwidth=bandwidth, latency=latency, name="given"), notes
    g = _ranks(args.ranks_per_node, "--ranks-per-node")
    if args.bandwidth is None or args.inter_bandwidth is None:
        raise ConfigError("--ranks-per-node needs --bandwidth (each rank's intra-node bandwidth) and "
                          "--inter-bandwidth (the node's bandwidth to other nodes, all NICs together)")
    intra_bw = parse_bandwidth(args.bandwidth, field="--bandwidth")
    ports, per_port = parse_ports(args.inter_bandwidth, field="--inter-bandwidth")
    intra_lat, inter_lat = DEFAULT_INTRA_LATENCY, DEFAULT_LINK.latency
    if args.latency is None:
        notes.append(f"no --latency given: assuming {format_time(intra_lat)} per intra-node hop")
    else:
        intra_lat = parse_time(args.latency, field="--latency")
    if args.inter_latency is None:
        notes.append(f"no --inter-latency given: assuming {format_time(inter_lat)} per inter-node hop")
    else:
        inter_lat = parse_time(args.inter_latency, field="--inter-latency")
    network = Hierarchy(
        ranks_per_node=g,
        intra=LinkCost(bandwidth=intra_bw, latency=intra_lat, name="given: intra-node, per rank"),
        inter=LinkCost(bandwidth=ports * per_port, latency=inter_lat, name="given: inter-node, per node"),
    )
    return network, notes


def _catalog_network(args) -> tuple[object, list[str]]:
    """The network of ``--link NAME`` (one level) or ``--node PRESET`` (two levels)."""
    from willitscale.collectives.network import Hierarchy, LinkCost
    from willitscale.errors import ConfigError

    given = [f"--{f.replace('_', '-')}" for f in ("link", "node", "bandwidth", "latency", "ranks_per_node",
                                                   "inter_bandwidth", "inter_latency") if getattr(args, f) is not None]
    if len(given) > 1:
        raise ConfigError(f"{given[0]} describes the whole network: drop {', '.join(given[1:])}")
    from willitscale.hardware import get_link, get_node

    if args.link is not None:
        link = get_link(args.link)
        note = (f"link {link.name}: {link.efficiency:g} x the advertised bandwidth is achievable "
                f"(catalog efficiency), {link.latency * 1e6:g} us per hop")
        return LinkCost.from_link(link), [note]
    node = get_node(args.node)
    note = (f"node {node.name}: {node.gpus_per_node} GPUs per node, each link derated to its catalog "
            f"efficiency ({node.intra_link.name} x {node.intra_link.efficiency:g}, "
            f"{node.nics} x {node.nic.name} x {node.nic.efficiency:g})")
    return Hierarchy.from_node(node), [note]


def _size_note(op) -> str | None:
    from willitscale.collectives.ops import Op

    return {
        Op.ALL_GATHER: "size is the gathered output (nccl-tests convention): each rank contributes size/ranks",
        Op.REDUCE_SCATTER: "size is the input (nccl-tests convention): each rank keeps size/ranks of the result",
        Op.ALL_TO_ALL: "size is one rank's send buffer (nccl-tests convention): size/ranks goes to each rank",
    }.get(op)


_NCCL_ONLY = {"nvls", "nvlstree", "nvls_tree", "collnetdirect", "collnetchain", "collnet_direct",
              "collnet_chain", "pat"}


def _backend(args) -> str:
    """The backend asked for, or the default: nccl with --node (or NCCL-only flags), else alpha-beta."""
    from willitscale.errors import ConfigError

    nccl_flags = [f for f, v in (("--protocol", args.protocol), ("--gpus-per-process", args.gpus_per_process),
                                 ("--sharp", args.sharp or None), ("--calibration", args.calibration),
                                 ("--nccl-env", getattr(args, "nccl_env", None)))
                  if v is not None]
    named = (args.algorithm or "").strip().lower().replace("-", "_")
    backend = args.backend or ("nccl" if args.node is not None or nccl_flags or named in _NCCL_ONLY
                               else "alpha-beta")
    if backend == "nccl" and args.node is None:
        implied = ", ".join(nccl_flags) if args.backend is None and nccl_flags else ""
        raise ConfigError("--backend nccl" + (f" (implied by {implied})" if implied else "")
                          + " needs --node PRESET (NCCL's model reads the node's GPUs, NVLink, NICs "
                          "and CPU; `willitscale hardware list --kind node`)")
    if backend == "alpha-beta" and args.calibration is not None:
        raise ConfigError("--calibration applies with --backend nccl (measured pairs where NCCL's "
                          "model picks them) or --backend gloo (Gloo's one algorithm per op), not "
                          "with alpha-beta, which costs the links given by --bandwidth/--latency or "
                          "--link; a calibration's fitted links and measured pairs together are "
                          "used by `willitscale estimate --calibration FILE`")
    nccl_only = [f for f in nccl_flags if f != "--calibration"]
    if backend != "nccl" and nccl_only:
        raise ConfigError(f"{nccl_only[0]} applies with --backend nccl only (NCCL's protocols and "
                          "launch modes), not with --backend " + backend)
    if backend != "gloo" and args.device is not None:
        raise ConfigError("--device applies with --backend gloo only")
    return backend


def _sizes(text: str) -> list[float]:
    from willitscale.units import parse_size

    return [parse_size(part, field="--size", unit_required=True) for part in text.split(",") if part.strip()]


def run(args) -> int:
    from willitscale.collectives import (
        collective_cost,
        fastest,
        not_applicable_reason,
        parse_algorithm,
        parse_op,
    )
    from willitscale.collectives.algorithms import PREFERENCE
    from willitscale.errors import ConfigError

    op = parse_op(args.op, field="OP")
    sizes = _sizes(args.size)
    ranks = _ranks(args.ranks, "--ranks")
    backend = _backend(args)
    if backend == "nccl":
        from willitscale.cli.collective_nccl import run_nccl

        return run_nccl(args, op, sizes, ranks)
    network, notes = build_network(args)
    if backend == "gloo":
        from willitscale.cli.collective_nccl import run_gloo

        if args.algorithm is not None:
            raise ConfigError("--algorithm does not apply with --backend gloo: Gloo runs one "
                              "algorithm per op whatever the size (docs/collectives.md)")
        return run_gloo(args, op, sizes, ranks, network, notes)
    if len(sizes) != 1:
        raise ConfigError("--size", args.size, "one size with --backend alpha-beta (several with nccl or gloo)")
    size = sizes[0]
    notes += [n for n in (_size_note(op),) if n]
    notes.append("alpha-beta model: no contention beyond the links described; trees and chains at their "
                 "pipelined limit (see docs/collectives.md)")
    if args.algorithm is not None and args.algorithm.strip().lower() != "all":
        algorithm = parse_algorithm(args.algorithm, field="--algorithm")
        cost = collective_cost(op, algorithm, size, ranks, network)
        if args.json:
            from willitscale.cli.output import print_json

            print_json({**cost.to_json(), "network": network.to_json(), "assumptions": notes})
        else:
            _print_table(op, size, ranks, network, [cost], None, [], notes)
        return 0
    choice = fastest(op, size, ranks, network)
    skipped = [(a, not_applicable_reason(op, a, network)) for a in PREFERENCE]
    skipped = [(a, why) for a, why in skipped if why]
    if args.json:
        from willitscale.cli.output import print_json

        print_json({
            "op": op.value, "size_bytes": size, "ranks": ranks, "network": network.to_json(),
            "results": [c.to_json() for c in choice.candidates],
            **choice.to_json(),
            "not_applicable": [{"algorithm": a.value, "reason": why} for a, why in skipped],
            "assumptions": notes,
        })
    else:
        _print_table(op, size, ranks, network, list(choice.candidates), choice, skipped, notes)
    return 0


_TIME_UNITS = ((1.0, "s"), (1e-3, "ms"), (1e-6, "us"), (1e-9, "ns"))
_SIZE_UNITS = ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB"), (1.0, "B"))
_BW_UNITS = ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s"), (1.0, "B/s"))


def _column(values, reference: float, units) -> tuple[str, list[str]]:
    """One unit for the whole column (picked from ``reference``, the chosen row) and the numbers."""
    ref = reference if reference > 0 else max([v for v in values] + [0.0])
    scale, label = units[-1]
    for s, lab in units:
        if ref >= s * 0.9995:
            scale, label = s, lab
            break
    return label, [_number(v / scale) for v in values]


def _number(x: float) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:.0f}"
    return f"{x:.3g}" if abs(x) >= 0.001 else f"{x:.2e}"


def _print_table(op, size, ranks, network, costs, choice, skipped, notes) -> None:
    from rich import box
    from rich.markup import escape
    from rich.table import Table

    from willitscale.cli.output import console
    from willitscale.units import format_size

    costs = sorted(costs, key=lambda c: float(c.time))
    ref = choice.cost if choice is not None else costs[0]
    specs = [  # header, field, unit table (None: a count)
        ("time", "time", _TIME_UNITS), ("algbw", "algbw", _BW_UNITS), ("busbw", "busbw", _BW_UNITS),
        ("rounds", "rounds", None), ("sent\n/rank", "bytes_sent_per_rank", _SIZE_UNITS),
        ("node\nin", "peak_node_bytes_in", _SIZE_UNITS), ("node\nout", "peak_node_bytes_out", _SIZE_UNITS),
        ("fan\nin", "fan_in", None),
    ]
    table = Table(title=f"{op.value} of {format_size(size)} over {ranks} ranks", title_justify="left",
                  box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, padding=(0, 1), collapse_padding=True)
    table.add_column("algorithm", no_wrap=True)
    columns = []
    for header, field, units in specs:
        values = [float(getattr(c, field)) for c in costs]
        if units is None:
            label, cells = "", [str(int(v)) for v in values]
        else:
            label, cells = _column(values, float(getattr(ref, field)), units)
        table.add_column(f"{header}\n[dim]{label}[/dim]" if label else header, justify="right", no_wrap=True)
        columns.append(cells)
    for i, c in enumerate(costs):
        mark = " *" if choice is not None and c.algorithm == choice.algorithm else ""
        table.add_row(c.algorithm.value + mark, *(col[i] for col in columns))
    out = console()
    out.print(table)
    out.print(f"network: {escape(network.describe())}")  # link names: user catalogs
    if choice is not None:
        out.print(f"* chosen: {escape(choice.reason)}")
    out.print("formulas (S size, n ranks, α latency, B bandwidth; g ranks per node, m nodes; "
              "node = a rank on one level, a server's NICs on two):")
    for c in costs:
        out.print(f"  {c.algorithm.value}: {escape(c.formula)}")
    if skipped:
        names = ", ".join(a.value for a, _ in skipped)
        out.print(f"not applicable: {names} (--algorithm NAME says why; --json lists the reasons)")
    for note in notes:
        out.print(f"assumption: {escape(note)}")
