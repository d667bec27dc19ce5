"""Build a :class:`~willitscale.hardware.model.Cluster` from a preset, a GPU and link specs.

:func:`build_cluster` is what ``willitscale estimate`` (and every command taking ``--preset``,
``--gpu``, ``--intra-node``, ``--inter-node``) calls. Every default it fills in is written to
``Cluster.assumptions`` so a report can say what it assumed. The rules (docs/hardware.md):

* ``preset`` (a node name) gives everything: GPU, count, links, NICs.
* ``gpu`` alone: ``gpus_per_node`` (default 8) of that GPU on its standard link and wiring
  (``h100`` -> NVLink 4 through NVSwitch), with one ``default_nic`` port per GPU.
* A link spec is a catalog name (``nvlink4``, ``pcie5``, ``ib-ndr``, ``roce-400g``), a bandwidth
  (``200Gbps``, ``25GB/s``, ``"600GB/s duplex"``) or ports (``8x400Gbps``, ``8xib-ndr``).
  Between nodes, a bare name keeps the node's port count (the preset's, or one per GPU) and
  swaps the port type; a bare bandwidth is the node's total, as one port; ``N x`` says N ports.
  Inside a node, a bandwidth is per GPU and ``N x`` means N links per GPU.
* A bare bandwidth becomes a ``GENERIC`` link with the latency and efficiency defaults of the
  catalog link closest to it in bandwidth (ties: InfiniBand between nodes, NVLink inside).
"""

from __future__ import annotations

import math
import re
from dataclasses import replace

from willitscale.errors import ConfigError, UnknownNameError
from willitscale.hardware.catalog import Catalog, load_catalog
from willitscale.hardware.model import Cluster, Gpu, Link, LinkKind, Node
from willitscale.units import format_bandwidth, format_time, parse_ports

__all__ = ["build_cluster", "parse_link_spec", "DEFAULT_GPUS_PER_NODE"]

#: GPUs per node when only ``gpu`` is given: the 8-GPU HGX/OAM baseboard almost every server uses
DEFAULT_GPUS_PER_NODE = 8
#: the largest single NVLink domain NVIDIA specifies: fifth-generation NVLink Switch "scaling up
#: to 576 GPUs" (NVIDIA NVLink and NVLink Switch page, https://www.nvidia.com/en-us/data-center/nvlink/;
#: the shipped GB200 NVL72 rack holds 72). More GPUs in one "node" is not a machine anyone built.
MAX_GPUS_PER_NODE = 576

_COUNT_RE = re.compile(r"^(?P<count>\d+)\s*[xX×*]\s*(?P<body>\S.*)$")
#: the wiring a generic intra-node bandwidth implies, from the kind of its nearest catalog link
_GENERIC_TOPOLOGY = {LinkKind.PCIE: "pcie", LinkKind.INFINITY_FABRIC: "full-mesh"}
_INTRA_KINDS = (LinkKind.NVLINK, LinkKind.NVSWITCH, LinkKind.INFINITY_FABRIC, LinkKind.PCIE)
_INTER_KINDS = (LinkKind.INFINIBAND, LinkKind.ETHERNET, LinkKind.EFA, LinkKind.OMNIPATH)


def _describe(link: Link) -> str:
    return (f"{link.name}: {format_bandwidth(link.bandwidth)} one direction "
            f"({format_bandwidth(link.bandwidth, bits=True)}), latency {format_time(link.latency)}, "
            f"efficiency {link.efficiency:.2f}")


def _generic(text: str, bandwidth: float, *, inter: bool, catalog: Catalog, links: int | None = None
             ) -> tuple[Link, str]:
    """A GENERIC link of ``bandwidth`` with the defaults of the nearest catalog link's kind."""
    if not bandwidth > 0:
        raise ConfigError("inter_node" if inter else "intra_node", text, "a bandwidth > 0")
    kinds = _INTER_KINDS if inter else _INTRA_KINDS
    candidates = [l for l in catalog.links.values() if l.kind in kinds]
    nearest = min(candidates, key=lambda l: (round(abs(math.log(l.bandwidth / bandwidth)), 9),
                                             kinds.index(l.kind), l.name))
    defaults = catalog.link_defaults(nearest.kind)
    link = Link(
        name=text, kind=LinkKind.GENERIC, bandwidth=bandwidth, latency=defaults.latency,
        efficiency=defaults.efficiency, links=links,
        topology="" if inter else _GENERIC_TOPOLOGY.get(nearest.kind, ""),
        display_name=f"generic {format_bandwidth(bandwidth, bits=inter)} link",
        source=f"bandwidth given as {text!r}",
        latency_source=f"default for {nearest.kind.value} links: {defaults.latency_source}",
        efficiency_source=f"default for {nearest.kind.value} links: {defaults.efficiency_source}",
    )
    note = (f"{text!r} is a generic link of {format_bandwidth(bandwidth)} one direction; its latency "
            f"({format_time(defaults.latency)}) and efficiency ({defaults.efficiency:.2f}) are the "
            f"{nearest.kind.value} defaults (nearest catalog link: {nearest.name})")
    return link, note


def parse_link_spec(spec: str, *, inter: bool, catalog: Catalog | None = None
                    ) -> tuple[int | None, Link, tuple[str, ...]]:
    """``(count, link, notes)`` from a link spec. ``count`` is None when the spec gave none
    (a bare name), else the number of ports (between nodes) or links per GPU (inside a node)."""
    catalog = catalog or load_catalog()
    role = "inter_node" if inter else "intra_node"
    text = str(spec).strip()
    match = _COUNT_RE.match(text)
    if match:
        count, body = int(match["count"]), match["body"].strip()
        if count < 1:
            raise ConfigError(role, spec, "a port count >= 1, as in 8x400Gbps")
    else:
        count, body = None, text
    try:
        link = catalog.link(body)
    except UnknownNameError as unknown:
        try:
            _, bandwidth = parse_ports(body, field=role)
        except ConfigError:
            raise ConfigError(role, spec, f"a catalog link ({unknown}), a bandwidth such as 200Gbps "
                              "or 25GB/s, or ports such as 8x400Gbps") from None
        if not inter and count:
            link, note = _generic(text, count * bandwidth, inter=False, catalog=catalog, links=count)
            return count, link, (note,)
        link, note = _generic(body if count else text, bandwidth, inter=inter, catalog=catalog)
        return (count if count else 1), link, (note,)
    if inter and not link.kind.inter_node:
        raise ConfigError(role, spec, f"a NIC port (InfiniBand, Ethernet, EFA, Omni-Path); "
                          f"{link.name} is a GPU-to-GPU link ({link.kind.value}); use it for intra_node")
    if not inter and link.kind.inter_node:
        raise ConfigError(role, spec, f"a GPU-to-GPU link (NVLink, PCIe, Infinity Fabric); "
                          f"{link.name} is a NIC port ({link.kind.value}); use it for inter_node")
    if not inter and count is not None:
        raise ConfigError(role, spec, f"{link.name} alone (it already is one GPU's links) or a "
                          "bandwidth per GPU such as 12x25GB/s")
    return count, link, ()


def _count(value: object, field: str, default: int | None) -> int | None:
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(field, value, "an integer >= 1")
    return value


def _intra_topology(link: Link, gpu: Gpu, fallback: str) -> str:
    if link.name == gpu.intra_node_link and gpu.intra_topology:
        return gpu.intra_topology
    if link.topology:
        return link.topology
    if link.kind is LinkKind.PCIE:
        return "pcie"
    if link.kind is LinkKind.INFINITY_FABRIC:
        return "full-mesh"
    return fallback


def _gpu_intra(catalog: Catalog, gpu: Gpu, spec: str | None, notes: list[str]) -> tuple[Link, str]:
    """The intra-node link and wiring for a bare GPU: its standard ones unless ``spec`` is given."""
    if spec is not None:
        _, link, link_notes = parse_link_spec(spec, inter=False, catalog=catalog)
        notes.extend(link_notes)
        return link, _intra_topology(link, gpu, "nvswitch")
    if gpu.intra_node_link is None:
        raise ConfigError(f"GPU {gpu.name} has no default intra-node link: give intra_node "
                          "(a catalog link such as nvlink4 or pcie5, or a bandwidth per GPU)")
    link = catalog.link(gpu.intra_node_link)
    return link, _intra_topology(link, gpu, "nvswitch")


def _node_from_gpu(catalog: Catalog, gpu: Gpu, gpus_per_node: int | None, notes: list[str], *,
                   intra_node: str | None, inter_node: str | None, warnings: list[str]) -> Node:
    if gpus_per_node is None:
        gpus_per_node = DEFAULT_GPUS_PER_NODE
        notes.append(f"gpus_per_node: {gpus_per_node} (default: the standard 8-GPU baseboard)")
    intra, topology = _gpu_intra(catalog, gpu, intra_node, notes)
    board = gpus_per_node
    if topology == "full-mesh" and intra.links is not None and intra.kind is not LinkKind.GENERIC:
        board = max(gpus_per_node, intra.links + 1)  # one link to each peer of a full board
    if intra_node is None:
        notes.append(f"intra-node: {gpu.name}'s standard link {intra.name}, wired {topology}"
                     + (f" on a {board}-GPU board" if board != gpus_per_node else ""))
    if gpus_per_node > MAX_GPUS_PER_NODE:
        raise ConfigError("gpus_per_node", gpus_per_node,
                          f"at most {MAX_GPUS_PER_NODE} (the largest NVLink domain NVIDIA specifies; "
                          f"standard servers hold {DEFAULT_GPUS_PER_NODE}): describe more GPUs as "
                          "more --nodes")
    if gpus_per_node > DEFAULT_GPUS_PER_NODE:
        what = ("one switched NVLink domain at the full per-GPU NVLink bandwidth, as an NVL72 rack"
                if topology == "nvswitch" else f"one {topology} domain")
        warnings.append(f"{gpus_per_node} GPUs per node treated as {what}; standard servers hold "
                        f"{DEFAULT_GPUS_PER_NODE}: for {gpus_per_node // DEFAULT_GPUS_PER_NODE} "
                        f"servers of {DEFAULT_GPUS_PER_NODE} use --nodes")
    nic_name = gpu.default_nic or "ib-ndr"
    node = Node(name=f"{gpus_per_node}x{gpu.name}", display_name=f"{gpus_per_node} x {gpu.display_name}",
                gpu=gpu, gpus_per_node=gpus_per_node, board_gpus=board, intra_link=intra,
                intra_topology=topology, nic=catalog.link(nic_name), nics=gpus_per_node,
                source=gpu.source)
    if inter_node is not None:
        return _override_inter(catalog, node, inter_node, notes, keep="one per GPU")
    notes.append(f"inter-node: {gpus_per_node} x {nic_name} (one port per GPU, as "
                 f"{gpu.name}'s reference servers)" if gpu.default_nic else
                 f"inter-node: {gpus_per_node} x {nic_name} (GPU {gpu.name} names no default NIC)")
    return node


def _node_from_preset(catalog: Catalog, preset: str, gpu: str | None, gpus_per_node: int | None,
                      notes: list[str]) -> Node:
    node = catalog.node(preset)
    if gpu is not None and catalog.gpu(gpu).name != node.gpu.name:
        raise ConfigError(f"preset {node.name} has {node.gpu.name} GPUs, not {catalog.gpu(gpu).name}: "
                          "give either a preset or a GPU (with intra_node/inter_node to describe "
                          "its links)")
    notes.extend(node.notes)
    if gpus_per_node is None or gpus_per_node == node.gpus_per_node:
        return node
    if gpus_per_node > node.board_gpus:
        raise ConfigError("gpus_per_node", gpus_per_node,
                          f"at most {node.board_gpus}, the GPUs of one {node.name} node")
    nics = max(1, round(node.nics * gpus_per_node / node.gpus_per_node))
    notes.append(f"using {gpus_per_node} of {node.name}'s {node.gpus_per_node} GPUs and "
                 f"{nics} of its {node.nics} {node.nic.name} ports (in proportion)")
    return replace(node, gpus_per_node=gpus_per_node, nics=nics)


def _override_intra(catalog: Catalog, node: Node, spec: str, notes: list[str]) -> Node:
    count, link, link_notes = parse_link_spec(spec, inter=False, catalog=catalog)
    notes.extend(link_notes)
    fallback = node.intra_topology if node.intra_topology not in ("pcie", "bridge-pairs") else "nvswitch"
    topology = _intra_topology(link, node.gpu, fallback)
    if link.kind is LinkKind.GENERIC and topology == "nvswitch":
        notes.append(f"intra-node: GPUs switched as through NVSwitch (any pair at the full {spec!r})")
    switch = node.nvswitch if topology == "nvswitch" else None
    return replace(node, intra_link=link, intra_topology=topology, nvswitch=switch,
                   nvswitches=node.nvswitches if switch else 0)


def _override_inter(catalog: Catalog, node: Node, spec: str, notes: list[str], *,
                    keep: str = "the node's") -> Node:
    count, link, link_notes = parse_link_spec(spec, inter=True, catalog=catalog)
    notes.extend(link_notes)
    nics = node.nics if count is None else count
    if count is None:
        notes.append(f"inter-node: {nics} x {link.name} ({keep} port count; write 1x{spec} for one port)")
    return replace(node, nic=link, nics=nics)


def build_cluster(*, preset: str | None = None, gpu: str | None = None, nodes: int = 1,
                  gpus_per_node: int | None = None, intra_node: str | None = None,
                  inter_node: str | None = None, catalog: Catalog | None = None) -> Cluster:
    """The cluster ``estimate`` runs on, from a preset node or a GPU plus optional link specs.

    >>> c = build_cluster(preset="dgx-h100", nodes=4)
    >>> c.gpus, c.node.nic.name, c.node.nics
    (32, 'ib-ndr', 8)
    """
    catalog = catalog or load_catalog()
    nodes = _count(nodes, "nodes", 1)
    gpus_per_node = _count(gpus_per_node, "gpus_per_node", None)
    notes: list[str] = []
    warnings: list[str] = []
    if preset is not None:
        node = _node_from_preset(catalog, preset, gpu, gpus_per_node, notes)
        if intra_node is not None:
            node = _override_intra(catalog, node, intra_node, notes)
        if inter_node is not None:
            node = _override_inter(catalog, node, inter_node, notes)
    elif gpu is not None:
        node = _node_from_gpu(catalog, catalog.gpu(gpu), gpus_per_node, notes,
                              intra_node=intra_node, inter_node=inter_node, warnings=warnings)
    else:
        raise ConfigError("give a preset node (e.g. preset dgx-h100, p5, baskerville) or a GPU "
                          "(e.g. gpu h100); `willitscale hardware list` shows them")
    node = replace(node, board_gpus=max(node.board_gpus, node.gpus_per_node))
    for link in (node.intra_link, node.nic):
        notes.append(_describe(link))
    name = node.name if nodes == 1 else f"{nodes} x {node.name}"
    return Cluster(node=node, nodes=nodes, name=name, assumptions=tuple(dict.fromkeys(notes)),
                   warnings=tuple(warnings))
