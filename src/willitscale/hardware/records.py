"""Catalog entries as plain records with unit-named keys (for ``--json`` and reports).

Bandwidths appear one direction (``bandwidth_GBps``) and, labelled, both directions summed
(``duplex_bandwidth_GBps``); rates on the wire in bits (``bandwidth_Gbps``, ``lane_rate_Gbps``).
"""

from __future__ import annotations

from typing import Any

from willitscale.hardware.model import Gpu, Link, Node, Switch
from willitscale.units import BITS_PER_BYTE

__all__ = ["gpu_record", "link_record", "switch_record", "node_record", "record"]

GB = 1e9


def _round(x: float | None, digits: int = 6) -> float | None:
    return None if x is None else float(f"{x:.{digits}g}")


def gpu_record(gpu: Gpu) -> dict[str, Any]:
    """A GPU: memory in bytes and GiB, bandwidth in GB/s, dense and sparse peaks in TFLOP/s."""
    return {
        "name": gpu.name, "kind": "gpu", "display_name": gpu.display_name, "vendor": gpu.vendor,
        "form_factor": gpu.form_factor, "memory_type": gpu.memory_type,
        "memory_bytes": gpu.memory, "memory_GiB": _round(gpu.memory / 2**30),
        "memory_bandwidth_GBps": _round(gpu.memory_bandwidth / GB),
        "peak_TFLOPS": {k: _round(v / 1e12) for k, v in gpu.peak_flops.items()},
        "sparse_peak_TFLOPS": {k: _round(v / 1e12) for k, v in gpu.sparse_peak_flops.items()},
        "intra_node_link": gpu.intra_node_link, "intra_topology": gpu.intra_topology,
        "nvswitch": gpu.nvswitch, "default_nic": gpu.default_nic,
        "source": gpu.source, "notes": list(gpu.notes),
    }


def link_record(link: Link) -> dict[str, Any]:
    """A link: its breakdown, one-direction and duplex bandwidth, latency and efficiency."""
    return {
        "name": link.name, "kind": "link", "link_kind": link.kind.value,
        "display_name": link.display_name, "links": link.links, "lanes": link.lanes,
        "lane_rate_Gbps": _round(None if link.lane_rate is None else link.lane_rate * BITS_PER_BYTE / GB),
        "signaling_Gbps": _round(None if link.signaling_rate is None else link.signaling_rate / GB),
        "encoding": link.encoding,
        "link_bandwidth_GBps": _round(link.link_bandwidth / GB),
        "bandwidth_GBps": _round(link.bandwidth / GB),
        "bandwidth_Gbps": _round(link.bandwidth * BITS_PER_BYTE / GB),
        "duplex_bandwidth_GBps": _round(link.duplex_bandwidth / GB),
        "latency_us": _round(link.latency * 1e6),
        "efficiency": link.efficiency,
        "effective_bandwidth_GBps": _round(link.effective_bandwidth / GB),
        "topology": link.topology, "advertised": link.advertised, "source": link.source,
        "latency_source": link.latency_source, "efficiency_source": link.efficiency_source,
        "notes": list(link.notes),
    }


def switch_record(switch: Switch) -> dict[str, Any]:
    """An NVSwitch chip: ports, per-port and total bandwidth."""
    return {
        "name": switch.name, "kind": "switch", "display_name": switch.display_name,
        "ports": switch.ports, "port_link": switch.port_link,
        "port_bandwidth_GBps": _round(switch.port_bandwidth / GB),
        "bandwidth_GBps": _round(switch.bandwidth / GB),
        "duplex_bandwidth_GBps": _round(switch.duplex_bandwidth / GB),
        "in_network_reduction": switch.in_network_reduction,
        "source": switch.source, "notes": list(switch.notes),
    }


def node_record(node: Node) -> dict[str, Any]:
    """A node: its GPU (by name), both links in full, NIC count and totals."""
    peer = node.peer_bandwidth
    return {
        "name": node.name, "kind": "node", "display_name": node.display_name,
        "gpu": node.gpu.name, "gpus_per_node": node.gpus_per_node, "board_gpus": node.board_gpus,
        "intra_link": link_record(node.intra_link), "intra_topology": node.intra_topology,
        "peer_bandwidth_GBps": _round(None if peer is None else peer / GB),
        "nvswitch": None if node.nvswitch is None else node.nvswitch.name,
        "nvswitches": node.nvswitches,
        "nic": link_record(node.nic), "nics": node.nics,
        "inter_node_bandwidth_GBps": _round(node.inter_node_bandwidth / GB),
        "inter_node_bandwidth_Gbps": _round(node.inter_node_bandwidth * BITS_PER_BYTE / GB),
        "source": node.source, "notes": list(node.notes),
    }


def record(entry: Gpu | Link | Switch | Node) -> dict[str, Any]:
    """The record of any catalog entry."""
    if isinstance(entry, Gpu):
        return gpu_record(entry)
    if isinstance(entry, Link):
        return link_record(entry)
    if isinstance(entry, Switch):
        return switch_record(entry)
    return node_record(entry)
