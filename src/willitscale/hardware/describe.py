"""Catalog entries as text for people: every number with its unit, direction and source.

Pure: returns lines; the CLI (``willitscale hardware show``) and reports print them.
"""

from __future__ import annotations

from willitscale.hardware.catalog import Catalog
from willitscale.hardware.model import Gpu, Link, Node, Switch
from willitscale.units import format_bandwidth, format_size, format_time

__all__ = ["describe", "link_summary", "link_name", "intra_link_name"]


def _bw(x: float) -> str:
    return format_bandwidth(x)


def link_summary(link: Link) -> str:
    """``"NVLink 4: 18 links, 450 GB/s one direction, 900 GB/s duplex"``."""
    parts = [f"{link.links} links"] if link.links else []
    parts += [f"{_bw(link.bandwidth)} one direction", f"{_bw(link.duplex_bandwidth)} duplex"]
    return f"{link.display_name or link.name}: " + ", ".join(parts)


def _link_lines(link: Link, indent: str = "  ") -> list[str]:
    lines = [link_summary(link) + f"  [{link.name}]"]
    if link.lanes is not None and link.lane_rate is not None:
        rate = link.lane_rate * 8 / 1e9
        unit = f"{link.links} links x " if link.links else ""
        lines.append(f"{indent}= {unit}{link.lanes} lanes x {rate:g} Gb/s per lane per direction"
                     + (f" ({link.signaling_rate / 1e9:g} Gb/s signaling, {link.encoding})"
                        if link.signaling_rate and link.encoding else
                        f" ({link.signaling_rate / 1e9:g} Gb/s signaling)" if link.signaling_rate else ""))
    if link.links:
        lines.append(f"{indent}per link: {_bw(link.link_bandwidth)} one direction, "
                     f"{_bw(2 * link.link_bandwidth)} duplex")
    if link.kind.inter_node:
        lines.append(f"{indent}per port: {format_bandwidth(link.bandwidth, bits=True)} one direction")
    lines.append(f"{indent}latency {format_time(link.latency)} per hop; efficiency {link.efficiency:.2f} "
                 f"-> {_bw(link.effective_bandwidth)} achievable one direction")
    if link.advertised:
        lines.append(f"{indent}vendor says: {link.advertised}")
    lines.append(f"{indent}source: {link.source}")
    lines.append(f"{indent}latency source: {link.latency_source}")
    lines.append(f"{indent}efficiency source: {link.efficiency_source}")
    lines += [f"{indent}note: {n}" for n in link.notes]
    return lines


def _gpu_lines(gpu: Gpu, catalog: Catalog) -> list[str]:
    lines = [f"  vendor {gpu.vendor}, {gpu.form_factor or 'form factor not given'}; memory "
             f"{format_size(gpu.memory, binary=True)} {gpu.memory_type} ({format_size(gpu.memory)}), "
             f"{_bw(gpu.memory_bandwidth)}",
             "", "  Peak FLOP/s, dense", f"  {'dtype':<6} {'TFLOP/s':>9}"]
    lines += [f"  {dtype:<6} {value / 1e12:>9.6g}" for dtype, value in gpu.peak_flops.items()]
    if gpu.sparse_peak_flops:
        lines.append(f"  (datasheets headline 2:4-sparsity figures for {', '.join(gpu.sparse_peak_flops)}, "
                     "2x these; training never uses them: see --json)")
    lines.append("")
    if gpu.intra_node_link:
        lines.append("GPU-to-GPU link: " + "\n  ".join(_link_lines(catalog.link(gpu.intra_node_link))))
    server = [f"wired {gpu.intra_topology}"] if gpu.intra_topology else []
    if gpu.nvswitch:
        server.append(f"through {catalog.switch(gpu.nvswitch).display_name} [{gpu.nvswitch}]")
    if gpu.default_nic:
        nic = catalog.link(gpu.default_nic)
        server.append(f"one {nic.display_name} [{nic.name}] per GPU")
    if server:
        lines.append("Standard server (what --gpu assumes): " + ", ".join(server))
    return lines


def _switch_lines(switch: Switch) -> list[str]:
    return [f"  {switch.ports} ports of {switch.port_link}, {_bw(switch.port_bandwidth)} one direction each",
            f"  total: {_bw(switch.bandwidth)} one direction, {_bw(switch.duplex_bandwidth)} duplex",
            f"  in-network reduction (NVLink SHARP): {'yes' if switch.in_network_reduction else 'no'}"]


def _node_lines(node: Node) -> list[str]:
    gpu = node.gpu
    dtype = "bf16" if "bf16" in gpu.peak_flops else next(iter(gpu.peak_flops))
    lines = [f"  {node.gpus_per_node} x {gpu.display_name} [{gpu.name}]: {format_size(gpu.memory, binary=True)}"
             f" and {gpu.peak(dtype) / 1e12:.6g} dense {dtype} TFLOP/s each",
             f"  wiring: {node.intra_topology}"
             + (f" through {node.nvswitches} x {node.nvswitch.display_name} [{node.nvswitch.name}]"
                if node.nvswitch else ""),
             "GPU-to-GPU link (per GPU): " + "\n  ".join(_link_lines(node.intra_link))]
    peer = node.peer_bandwidth
    if peer is not None and node.intra_topology == "full-mesh":
        lines.append(f"  one pair of GPUs: {_bw(peer)} one direction (its share of the mesh)")
    lines.append(f"Inter-node: {node.nics} x {node.nic.name} = "
                 f"{format_bandwidth(node.inter_node_bandwidth, bits=True)} "
                 f"({_bw(node.inter_node_bandwidth)}) one direction per node, "
                 f"{format_bandwidth(2 * node.inter_node_bandwidth, bits=True)} duplex")
    lines.append("  one port: " + "\n  ".join(_link_lines(node.nic)))
    return lines


def describe(entry: Gpu | Link | Switch | Node, catalog: Catalog) -> list[str]:
    """Lines describing one catalog entry, its derivations and sources."""
    aliases = catalog.aliases_of(entry.name)
    head = f"{getattr(entry, 'display_name', '') or entry.name}  [{entry.name}]"
    if aliases:
        head += f"  (also: {', '.join(aliases)})"
    lines = [head]
    if isinstance(entry, Gpu):
        lines += _gpu_lines(entry, catalog)
    elif isinstance(entry, Link):
        lines += _link_lines(entry)[1:]
        lines.insert(1, "  " + link_summary(entry))
    elif isinstance(entry, Switch):
        lines += _switch_lines(entry)
    else:
        lines += _node_lines(entry)
    if not isinstance(entry, Link):
        lines.append(f"Source: {entry.source}")
        lines += [f"Note: {n}" for n in entry.notes]
    origin = catalog.origins.get(entry.name, "")
    if origin and "willitscale/hardware/catalog" not in origin.replace("\\", "/"):
        lines.append(f"Defined in: {origin}")
    return lines


def intra_link_name(node) -> str:
    """The link one GPU uses inside ``node``, named with its usable one-direction bandwidth."""
    if node.gpus_per_node == 1:
        return "no intra-node peer (1 GPU per node)"
    usable = node.usable_intra_bandwidth
    if usable >= node.intra_link.bandwidth:
        return link_name(node.intra_link)
    label = node.intra_link.display_name or node.intra_link.name
    return (f"{label} ({format_bandwidth(usable)} one direction: the links to the "
            f"{node.gpus_per_node - 1} other GPU(s) in use of a {node.board_gpus}-GPU "
            f"{node.intra_topology})")


def link_name(link) -> str:
    """``"NVLink 4 (450 GB/s one direction)"``: a link with its one-direction bandwidth."""
    label = link.display_name or link.name
    return f"{label} ({format_bandwidth(link.bandwidth, bits=link.kind.inter_node)} one direction)"
