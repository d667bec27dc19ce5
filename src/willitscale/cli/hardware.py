"""``willitscale hardware list|show``: the catalog with units and sources.

Bandwidths are shown one direction AND duplex (both directions summed, the vendors' headline),
FLOP/s are dense (never the 2:4 sparsity figure), latency in microseconds.
"""

from __future__ import annotations

import argparse
from typing import Any

KINDS = ("gpu", "link", "switch", "node")


def register(subparsers: Any) -> None:
    from willitscale.cli.helptext import examples

    parser = subparsers.add_parser(
        "hardware", help="what the catalog says about a GPU, link, NVSwitch or node, with sources",
        description="What does the catalog know about a GPU, a link, an NVSwitch or a node "
                    "preset? Every number with its unit (bandwidths one direction and duplex) "
                    "and its source. Your own hardware: --catalog FILE, same format "
                    "(docs/hardware.md).",
        epilog=examples("willitscale hardware list --kind gpu", "willitscale hardware show h100-sxm",
                        "willitscale hardware show dgx-h100 --json"))
    sub = parser.add_subparsers(dest="hardware_command", metavar="{list,show}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--json", action="store_true", help="machine-readable output")
    common.add_argument("--catalog", action="append", default=[], metavar="FILE",
                        help="extra catalog TOML file (repeatable); same format as the built-in one")
    lst = sub.add_parser("list", parents=[common], help="list GPUs, links, NVSwitches and nodes",
                         description="Which GPUs, links, NVSwitches and node presets does the "
                                     "catalog hold? One table per kind, sources numbered below.",
                         epilog=examples("willitscale hardware list",
                                         "willitscale hardware list --kind link --json"))
    lst.add_argument("--kind", choices=KINDS, help="only this kind of entry")
    lst.set_defaults(run=run_list)
    show = sub.add_parser("show", parents=[common], help="everything about one GPU, link, switch or node",
                          description="Everything the catalog says about one GPU, link, switch "
                                      "or node preset, and where each number comes from.",
                          epilog=examples("willitscale hardware show a100-80gb",
                                          "willitscale hardware show ib-ndr",
                                          "willitscale hardware show dgx-h100 --json"))
    show.add_argument("name", metavar="NAME", help="a catalog name or alias, e.g. h100-sxm, nvlink4, dgx-h100")
    show.set_defaults(run=run_show)


def _catalog(args: argparse.Namespace):
    from willitscale.hardware.catalog import load_catalog

    return load_catalog(*args.catalog)


# ---------------------------------------------------------------------------- list


def run_list(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.hardware.records import record

    catalog = _catalog(args)
    tables = {"gpu": catalog.gpus, "link": catalog.links, "switch": catalog.switches, "node": catalog.nodes}
    kinds = [args.kind] if args.kind else list(KINDS)
    if args.json:
        plural = {"gpu": "gpus", "link": "links", "switch": "switches", "node": "nodes"}
        print_json({plural[k]: [dict(record(e), aliases=catalog.aliases_of(e.name))
                                for e in tables[k].values()] for k in kinds})
        return 0
    for kind in kinds:
        _LISTERS[kind](list(tables[kind].values()))
    return 0


class _Sources:
    """Numbers each distinct source once, for a footnote list under a table."""

    def __init__(self) -> None:
        self.order: dict[str, int] = {}

    def ref(self, *sources: str) -> str:
        refs = []
        for source in sources:
            if source and source not in self.order:
                self.order[source] = len(self.order) + 1
            if source:
                refs.append(str(self.order[source]))
        return ",".join(dict.fromkeys(refs))

    def print(self) -> None:
        for source, n in self.order.items():
            print(f"  [{n}] {source}")
        print()


def _num(x: float | None, fmt: str = ".5g") -> str:
    return "" if x is None else format(x, fmt)


def _print_table(title: str, columns: list[str], rows: list[list], units: list[str]) -> None:
    """A rich table with a units row, as wide as its content (names are never cut)."""
    import sys

    from rich.console import Console
    from rich.markup import escape
    from rich.measure import Measurement
    from rich.table import Table
    from rich.text import Text

    table = Table(title=escape(title), title_justify="left")
    for i, (name, unit) in enumerate(zip(columns, units, strict=True)):
        header = f"{escape(name)}\n[dim]{escape(unit)}[/dim]" if unit else escape(name)
        table.add_column(header, justify="left" if i == 0 else "right", no_wrap=True)
    for row in rows:  # names from user catalogs: plain text, never rich markup
        table.add_row(*(Text(str(v)) for v in row))
    probe = Console(file=sys.stdout, highlight=False)
    width = Measurement.get(probe, probe.options.update_width(1000), table).maximum
    Console(file=sys.stdout, highlight=False, soft_wrap=False, width=max(probe.width, width)).print(table)


def _list_gpus(gpus: list) -> None:
    src = _Sources()
    dtypes = ("fp32", "tf32", "bf16", "fp16", "fp8")
    rows = [[g.name, _num(g.memory / 2**30), _num(g.memory_bandwidth / 1e9),
             *(_num(g.peak_flops[d] / 1e12) if d in g.peak_flops else "-" for d in dtypes),
             g.intra_node_link or "", src.ref(g.source)] for g in gpus]
    _print_table("GPUs (peak FLOP/s are dense; the 2x sparsity figures are never used)",
                ["GPU", "HBM", "HBM bw", *dtypes, "GPU link", "src"], rows,
                units=["", "GiB", "GB/s", *["TFLOP/s"] * len(dtypes), "", ""])
    src.print()


def _breakdown(link) -> str:
    if link.lanes is None or link.lane_rate is None:
        return ""
    rate = f"{link.lane_rate * 8 / 1e9:.4g}"
    return (f"{link.links}x" if link.links else "") + f"{link.lanes}x{rate}"


def _list_links(links: list) -> None:
    src = _Sources()
    rows = [[l.name, l.kind.value, _breakdown(l), _num(l.bandwidth / 1e9), _num(l.duplex_bandwidth / 1e9),
             _num(l.bandwidth * 8 / 1e9), _num(l.latency * 1e6, "g"), f"{l.efficiency:.2f}",
             src.ref(l.source, l.latency_source, l.efficiency_source)] for l in links]
    _print_table("Links (GPU links: one GPU's links together; NICs: one port)",
                 ["link", "kind", "(links x) lanes x rate", "one dir", "duplex", "one dir", "latency",
                  "efficiency", "src"], rows,
                 ["", "", "Gb/s per lane per direction", "GB/s", "GB/s", "Gb/s", "us", "fraction", ""])
    src.print()


def _list_switches(switches: list) -> None:
    src = _Sources()
    rows = [[s.name, s.ports, s.port_link, _num(s.port_bandwidth / 1e9), _num(s.bandwidth / 1e9),
             _num(s.duplex_bandwidth / 1e9), "yes" if s.in_network_reduction else "no", src.ref(s.source)]
            for s in switches]
    _print_table("NVSwitch chips", ["switch", "ports", "port link", "per port", "one dir", "duplex",
                                   "SHARP", "src"], rows,
                units=["", "", "", "GB/s one dir", "GB/s", "GB/s", "", ""])
    src.print()


def _list_nodes(nodes: list) -> None:
    src = _Sources()
    rows = [[n.name, f"{n.gpus_per_node} x {n.gpu.name}", n.intra_link.name, n.intra_topology,
             _num(n.intra_link.bandwidth / 1e9), f"{n.nics} x {n.nic.name}",
             _num(n.inter_node_bandwidth * 8 / 1e9), src.ref(n.source)] for n in nodes]
    _print_table("Nodes", ["node", "GPUs", "GPU link", "wiring", "per GPU", "NICs", "per node", "src"],
                rows, units=["", "", "", "", "GB/s one dir", "", "Gb/s one dir", ""])
    src.print()


_LISTERS = {"gpu": _list_gpus, "link": _list_links, "switch": _list_switches, "node": _list_nodes}


# ---------------------------------------------------------------------------- show


def run_show(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.hardware.records import record

    catalog = _catalog(args)
    kind, entry = catalog.find(args.name)
    if args.json:
        out = dict(record(entry), aliases=catalog.aliases_of(entry.name),
                   defined_in=catalog.origins.get(entry.name))
        if kind == "gpu" and entry.intra_node_link:
            out["intra_node_link"] = record(catalog.link(entry.intra_node_link))
        print_json(out)
        return 0
    from willitscale.hardware.describe import describe

    print("\n".join(describe(entry, catalog)))
    return 0
