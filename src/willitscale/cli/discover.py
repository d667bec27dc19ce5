"""``willitscale discover``: this node's GPUs, NVLink, NICs, CPUs and NUMA layout, as a node
preset the catalog loads, with what looks wrong (a GPU far from every NIC, no GPUDirect RDMA)."""

from __future__ import annotations

import argparse
import sys

__all__ = ["register"]

HELP = "this node's GPUs, NVLink, NICs and NUMA layout, as a node preset the catalog loads"

DESCRIPTION = """\
Read this node: nvidia-smi (GPU names, memory) and its topology matrix (`nvidia-smi topo -m`:
NVLink between GPUs, PCIe and NUMA paths to the NICs), /sys (NUMA nodes and their CPUs,
InfiniBand ports and their rates, Ethernet speeds, the nvidia_peermem module of GPUDirect RDMA)
and /proc/cpuinfo. Print what was found, how each catalog entry was chosen, and warnings.

With --write, store a node preset ([node.NAME] in $WILLITSCALE_HOME/catalog/NAME.toml) that
every command then accepts as --preset NAME. On a machine without NVIDIA GPUs only the CPU side
is reported and no preset can be written."""


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser("discover", help=HELP, description=DESCRIPTION, epilog=examples(
        "willitscale discover", "willitscale discover --json",
        "willitscale discover --write --name my-node"))
    p.add_argument("--from", dest="captures", metavar="DIR", default=None,
                   help="read saved outputs instead of this machine: nvidia-smi-topo.txt, "
                        "nvidia-smi-q.txt, ibstat.txt, sys-class-infiniband/ (a copy of "
                        "/sys/class/infiniband), cpuinfo.txt, hostname.txt in DIR")
    p.add_argument("--gpu", default=None, metavar="NAME",
                   help="with --from: the catalog GPU the captures show when they name none "
                        "(no nvidia-smi -q saved); checked against the topology matrix")
    p.add_argument("--json", action="store_true")
    p.add_argument("--write", action="store_true",
                   help="store the node preset in $WILLITSCALE_HOME/catalog/NAME.toml")
    p.add_argument("--name", default="discovered", help="the preset's name (default: discovered)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    from willitscale.bench.discover import (
        closest_node,
        compared_with,
        discover_node,
        preset_toml,
    )
    from willitscale.bench.environment import host_facts
    from willitscale.cli.output import print_json
    from willitscale.errors import ConfigError
    from willitscale.hardware import load_catalog
    from willitscale.hardware.catalog import catalog_dir
    from willitscale.results.store import now_iso

    if not args.name.replace("-", "").replace("_", "").isalnum():
        raise ConfigError("--name", args.name, "letters, digits, - and _ (a TOML key)")
    if args.captures:
        from willitscale.bench.captures import FILES, facts_from_captures

        folder = Path(args.captures).expanduser()
        if not folder.is_dir() or not any((folder / f).exists() for f in FILES):
            raise ConfigError("--from", str(folder), "a folder holding any of " + ", ".join(FILES))
        facts = facts_from_captures(folder)
    elif args.gpu:
        raise ConfigError("--gpu", args.gpu, "only with --from DIR (on a live node nvidia-smi "
                                             "names the GPUs)")
    else:
        facts = host_facts()
        facts["peermem"] = Path("/sys/module/nvidia_peermem").exists()
    catalog = load_catalog()
    if args.gpu:
        facts["gpu_hint"] = catalog.gpu(args.gpu)
    found = discover_node(facts, catalog)
    node = closest_node(found, catalog) if found.gpu else None
    same, differ = compared_with(found, node) if node else ([], [])
    written = None
    if args.write:
        text = preset_toml(found, args.name, when=now_iso())
        folder = catalog_dir()
        folder.mkdir(parents=True, exist_ok=True)
        written = folder / f"{args.name}.toml"
        written.write_text(text)
    if args.json:
        print_json({**found.to_json(), "preset": str(written) if written else None,
                    "closest_builtin": node.name if node else None, "same_as_builtin": same,
                    "differs_from_builtin": [{"field": k, "discovered": a, "builtin": b}
                                             for k, a, b in differ]})
    else:
        _print(found)
        if node:
            print(f"closest built-in node {node.name}: same {', '.join(same) or 'nothing'}")
            for k, a, b in differ:
                print(f"  {k}: discovered {a!r}, {node.name} has {b!r}")
        if written:
            print(f"node preset written to {written}: use --preset {args.name}")
    for warning in found.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    return 0


def _print(found) -> None:
    numa = ", ".join(f"node {n['node']}: CPUs {n['cpus']}" for n in found.numa) or "none listed"
    print(f"host {found.host}: {found.cpus} CPUs ({found.cpu or 'unknown model'}); NUMA {numa}")
    if found.gpus:
        model = found.gpu_names[0] if found.gpu_names else "(unnamed)"
        print(f"GPUs: {found.gpus} x {model} -> {found.gpu or '?'}; intra-node "
              f"{found.intra_link or '?'} ({found.intra_topology})")
    print(f"NICs: {found.nics} x {found.nic or '?'}"
          + (f" ({found.nic_rate_Gbps:g} Gb/s)" if found.nic_rate_Gbps else ""))
    for note in found.notes:
        print(f"  {note}")
