"""A catalog node as NCCL sees it: :func:`nccl_system` builds the :class:`NcclSystem` of a
communicator of ``ranks`` ranks, ``ranks_per_node`` of them on each node.

The translation uses NCCL's own link figures (src/graph/topo.h of v2.30.7-1): an NVLink is worth
its per-architecture bandwidth (20 GB/s on A100, 20.6 on H100, 40.1 on B200: ~80% of the 25 /
50 GB/s wire rate), a PCIe x16 link ``width x code / 80`` (24 GB/s at Gen4), a NIC its speed in
Gb/s over 8. What the catalog does not say is assumed and returned as a note: an unknown CPU is
taken as Intel (NCCL's default row), a GPU without a CUDA compute capability (AMD's, run by RCCL)
is given the Ampere rows.
"""

from __future__ import annotations

from functools import lru_cache

from willitscale.collectives.nccl import tables as T
from willitscale.collectives.nccl.env import NcclEnv
from willitscale.collectives.nccl.system import NcclSystem
from willitscale.errors import ConfigError
from willitscale.hardware.model import LinkKind, Node

__all__ = ["nccl_system"]

_NVLINK_KINDS = (LinkKind.NVLINK, LinkKind.NVSWITCH)
_PCIE_GEN_BY_SIGNALING = {8e9: 3, 16e9: 4, 32e9: 5, 64e9: 6}


def _intra(node: Node, cc: float) -> tuple[str, float, float, float | None]:
    """(link type, GB/s one GPU sends inside the node, GB/s of the best GPU-to-GPU path, GB/s of
    one GPU link as NCCL rates it (None over PCIe))."""
    link = node.intra_link
    usable = node.usable_intra_bandwidth / link.bandwidth  # a full mesh with fewer GPUs in use
    if link.kind is LinkKind.PCIE:
        gen = _PCIE_GEN_BY_SIGNALING.get(link.signaling_rate or 0.0, 4)
        bw = T.PCIE_X16_BW[gen]
        return "pci", bw, bw, None
    if link.kind in _NVLINK_KINDS and link.links:
        per_link = T.nvlink_link_bw(cc)
        total = link.links * per_link * usable
    else:  # Infinity Fabric and other GPU links: the catalog's achievable fraction
        per_link = link.link_bandwidth * link.efficiency / 1e9
        total = link.bandwidth * link.efficiency / 1e9 * usable
    topology = node.intra_topology
    if topology == "full-mesh" and node.board_gpus > 1 and link.links:
        path = per_link * (link.links // (node.board_gpus - 1))
    elif topology == "hybrid-cube-mesh":
        path = 2 * per_link  # DGX-1: at most two NVLinks join a pair
    else:
        path = total
    return "nvlink", total, path, per_link


@lru_cache(maxsize=64)
def _usual_efficiency(kind: LinkKind) -> float | None:
    from willitscale.hardware.catalog import load_catalog

    try:
        return load_catalog().link_defaults(kind).efficiency
    except (KeyError, ValueError):
        return None


def _measured_share(link) -> float:
    """A link measured below its kind's usual achievable fraction (a node's own measurement, or
    TCP sockets on an Ethernet port) runs NCCL that much slower: its efficiency over the kind's
    default, at most 1. NCCL's model itself has no efficiency: it assumes the port's speed."""
    usual = _usual_efficiency(link.kind)
    return 1.0 if usual is None else min(1.0, link.efficiency / usual)


def nccl_system(node: Node, *, ranks: int, ranks_per_node: int, net_share: float | None = None,
                collnet: bool = False, env: NcclEnv | None = None) -> tuple[NcclSystem, tuple[str, ...]]:
    """The communicator NCCL would build on ``node``s, and the assumptions made.

    ``net_share`` is the fraction of the node's network devices the communicator's ranks use
    (default ``ranks_per_node / gpus_per_node``: each GPU drives the NICs nearest it; the
    estimate passes its placement's share when several groups share a node's NICs).
    ``collnet``: SHARP / CollNet enabled (NCCL_COLLNET_ENABLE=1 with a plugin; off by default).
    ``env``: the NCCL environment settings the communicator runs with (:mod:`.nccl.env`).
    """
    if ranks_per_node > node.gpus_per_node:
        raise ConfigError("ranks_per_node", ranks_per_node, f"at most {node.gpus_per_node} (GPUs per node)")
    notes = []
    cc = node.gpu.compute_capability
    if cc is None:
        cc = 8.0
        notes.append(f"{node.gpu.name} has no CUDA compute capability: NCCL's Ampere tuning rows "
                     "are used (RCCL inherits NCCL's model)")
    cpu = node.cpu or "intel"
    if not node.cpu:
        notes.append(f"{node.name}'s CPU is not in the catalog: NCCL's Intel rows are used")
    if cpu == "arm":
        cpu = "other"
    intra, gpu_bw, path_bw, link_bw = _intra(node, cc)
    devices = node.nccl_net_devices or node.nics
    device_bw = node.nics * node.nic.bandwidth / devices / 1e9  # speed_Mbps / 8000
    slow_nic, slow_intra = _measured_share(node.nic), _measured_share(node.intra_link)
    if slow_nic < 1:
        device_bw *= slow_nic
        notes.append(f"{node.nic.name}: {node.nic.efficiency:g} of its rate achieved where its kind "
                     f"usually reaches more: NCCL's network bandwidth x {slow_nic:.2f}")
    if slow_intra < 1:
        gpu_bw, path_bw = gpu_bw * slow_intra, path_bw * slow_intra
        link_bw = link_bw * slow_intra if link_bw else link_bw
        notes.append(f"{node.intra_link.name}: {node.intra_link.efficiency:g} of its rate achieved "
                     f"where its kind usually reaches more: NCCL's intra-node bandwidth x {slow_intra:.2f}")
    share = ranks_per_node / node.gpus_per_node if net_share is None else float(net_share)
    pcie = T.PCIE_X16_BW[node.gpu.pcie_gen or 4]
    if node.gpu.pcie_gen is None:
        notes.append(f"{node.gpu.name}'s PCIe generation is not in the catalog: Gen4 assumed")
    switch = node.nvswitch
    system = NcclSystem(
        ranks=ranks, ranks_per_node=ranks_per_node, compute_capability=cc, intra=intra,
        gpu_bandwidth_GBps=gpu_bw, path_bandwidth_GBps=path_bw,
        nvswitch=node.intra_topology == "nvswitch",
        in_switch_reduction=bool(switch is not None and switch.in_network_reduction),
        net_devices=devices * share, net_device_GBps=device_bw, pcie_GBps=pcie,
        net_latency_us=node.net_plugin_latency * 1e6, cpu=cpu, collnet=collnet,
        nvlink_GBps=link_bw, env=env if env is not None else NcclEnv())
    return system, tuple(notes)
