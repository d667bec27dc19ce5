"""What NCCL sees of one communicator, and the channel graphs its topology search would find.

NCCL's cost model does not take link speeds directly: it takes, per algorithm, the result of its
topology search (``ncclTopoGraph``): a number of channels and a per-channel bandwidth inside the
node (``bwIntra``) and across nodes (``bwInter``). :func:`search_graphs` derives those from the
hardware with a simplified form of NCCL's search (src/graph/search.cc, v2.30.7-1):

* **ring** (and the tree's channel count): the first per-channel speed of NCCL's speed list that
  the path allows (one node: the GPU's NVLink or PCIe; across nodes: the NIC and its PCIe
  link), as many channels as the links carry (each network device carries ``bw // speed``
  channels; inside a node, each GPU forwards ``(ppn-1)/ppn`` of them over NVLink), then NCCL's
  duplication rule (x2 channels at half the speed when the speed is >= 25 GB/s, unless newer
  than sm80 with a speed below 50 and more than 4 channels).
* **tree** across nodes: the ring's channels; ``bwInter`` the network speed, ``bwIntra`` raised
  up to twice that while the NVLink carries it (search.cc 1267-1287).
* **NVLS**: one channel per GPU (at most 32); each GPU carries one extra (its head channel), so
  ``bwIntra`` is the first speed with ``(channels + 1) x speed`` within its NVLink; ``bwInter``
  twice that, at most the top speed (one node), or the network speed (several nodes).

Checked against NCCL's own log lines where public (tests/unit/test_collectives_nccl_graph.py):
8x H100 "nChannels 12, bw 30/30" (ring, tree) and "nChannels 8, bw 40/60" (NVLS); 8x A100
"nChannels 12, bw 20/20"; 3+ nodes of 8x H100 with 8 x 400G NICs "Channel xx/16" (8 search
channels, doubled at connection). Elsewhere the graphs are derivations, not NCCL output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from willitscale.collectives.nccl import tables as T
from willitscale.collectives.nccl.env import NcclEnv
from willitscale.errors import ConfigError

__all__ = ["Graph", "Graphs", "NcclSystem", "search_graphs"]

CPUS = ("intel", "amd", "other")


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclSystem:
    """One communicator as NCCL's tuning sees it. Bandwidths in NCCL's units (GB/s, one
    direction); ``net_*`` describe the network devices one node's ranks of this communicator
    use (NCCL's view: EFA NICs grouped into one device per GPU by aws-ofi-nccl count as one)."""

    ranks: int
    ranks_per_node: int  #: members of the communicator per node (ppn)
    compute_capability: float
    intra: str = "nvlink"  #: "nvlink" (direct or through NVSwitch) or "pci"
    gpu_bandwidth_GBps: float  #: what one GPU can send inside the node (all its NVLinks, or PCIe)
    path_bandwidth_GBps: float  #: the best single path between two GPUs of a node
    nvswitch: bool = False
    in_switch_reduction: bool = False  #: NVLink SHARP (NVSwitch gen 3 and later)
    net_devices: float = 1.0  #: network devices this communicator uses per node (may be a share)
    net_device_GBps: float = 0.0  #: one device's speed (speed_Mbps / 8000)
    pcie_GBps: float = 24.0  #: the GPU's PCIe link (its path to a NIC)
    net_latency_us: float = 0.0  #: the net plugin's reported latency (0 for NCCL's IB/socket)
    cpu: str = "intel"
    collnet: bool = False  #: SHARP / CollNet enabled (NCCL_COLLNET_ENABLE=1 and a plugin)
    simple_only: bool = False  #: LL and LL128 off (e.g. EFA without in-order 128-byte delivery)
    nvlink_GBps: float | None = None  #: one NVLink as NCCL rates it; None: NCCL's figure for the GPU
    env: NcclEnv = NcclEnv()  #: the NCCL environment settings it runs with (:mod:`.env`)

    def __post_init__(self) -> None:
        for name in ("ranks", "ranks_per_node"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ConfigError(f"NcclSystem.{name}", v, "an integer >= 1")
        if self.ranks % self.ranks_per_node:
            raise ConfigError("NcclSystem.ranks", self.ranks,
                              f"a multiple of ranks_per_node = {self.ranks_per_node}")
        if self.intra not in ("nvlink", "pci"):
            raise ConfigError("NcclSystem.intra", self.intra, "nvlink or pci")
        if self.cpu not in CPUS:
            raise ConfigError("NcclSystem.cpu", self.cpu, "one of " + ", ".join(CPUS))
        for name in ("gpu_bandwidth_GBps", "path_bandwidth_GBps", "pcie_GBps"):
            if not getattr(self, name) > 0:
                raise ConfigError(f"NcclSystem.{name}", getattr(self, name), "a number > 0")
        if not isinstance(self.env, NcclEnv):
            raise ConfigError("NcclSystem.env", self.env, "an NcclEnv (collectives.nccl.env.parse_nccl_env)")
        if self.nvlink_GBps is not None and not self.nvlink_GBps > 0:
            raise ConfigError("NcclSystem.nvlink_GBps", self.nvlink_GBps, "a number > 0 or None")
        if self.nodes > 1 and not (self.net_devices > 0 and self.net_device_GBps > 0):
            raise ConfigError("NcclSystem.net_device_GBps", self.net_device_GBps,
                              "a network speed > 0 for a communicator across nodes")

    @property
    def nodes(self) -> int:
        return self.ranks // self.ranks_per_node

    @property
    def arch(self) -> T.Arch:
        return T.arch_of(self.compute_capability)

    @property
    def nvls_capable(self) -> bool:
        """NVLS needs an NVSwitch that reduces, sm90 or later (search.cc 1124) and >= 2 GPUs."""
        return (self.nvswitch and self.in_switch_reduction and self.compute_capability >= 9.0
                and self.ranks_per_node >= 2)


@dataclass(frozen=True, slots=True, kw_only=True)
class Graph:
    """One search result: channels, per-channel GB/s inside and across nodes."""

    channels: int
    bw_intra: float
    bw_inter: float

    def describe(self) -> str:
        return f"{self.channels} ch x {self.bw_intra:g}/{self.bw_inter:g} GB/s"


@dataclass(frozen=True, slots=True, kw_only=True)
class Graphs:
    ring: Graph
    tree: Graph
    nvls: Graph | None  #: None where NVLS cannot run
    runtime_channels: int  #: channels at run time, ``comm->nChannels`` (the ring plateau test and p2p read them)


def _family(cc: float) -> str:
    return "sm100" if cc >= 10.0 else "sm90" if cc >= 9.0 else "pre90"


def _first_at_most(speeds, limit: float) -> float:
    for s in speeds:
        if s <= limit + 1e-9:
            return s
    return speeds[-1]


def _duplicate(channels: int, speed: float, cc: float) -> tuple[int, float]:
    """NCCL's channel duplication (search.cc 1036-1049)."""
    if speed < T.DUP_MIN_BW or (cc > 8.0 and speed < T.DUP_SKIP_BW and channels > T.DUP_SKIP_CHANNELS):
        return channels, speed
    doubled = min(2 * channels, T.MAX_SEARCH_CHANNELS)
    return doubled, speed * channels / doubled


def _net(system: NcclSystem) -> tuple[int, float]:
    """(devices, GB/s each): a share of one device counts as one slower device."""
    devices, speed = system.net_devices, system.net_device_GBps
    if devices < 1:
        return 1, speed * devices
    return int(math.floor(devices + 1e-9)), speed


def _ring_one_node(system: NcclSystem) -> Graph:
    cc, C = system.compute_capability, system.gpu_bandwidth_GBps
    s = _first_at_most(T.SPEEDS_INTRA[_family(cc)], min(system.path_bandwidth_GBps, C))
    channels = max(1, min(int(C // s), T.MAX_SEARCH_CHANNELS))
    channels, s = _duplicate(channels, s, cc)
    return Graph(channels=channels, bw_intra=s, bw_inter=s)


def _ring_nodes(system: NcclSystem) -> Graph:
    cc, ppn = system.compute_capability, system.ranks_per_node
    devices, dev_bw = _net(system)
    path = min(dev_bw, system.pcie_GBps)
    s = _first_at_most(T.SPEEDS_INTER[_family(cc)], path)
    channels = devices * max(1, int(dev_bw // s))
    if ppn > 1:  # each GPU forwards (ppn-1)/ppn of the channels over its NVLink
        fit = int(system.gpu_bandwidth_GBps // (s * (ppn - 1) / ppn))
        channels = max(1, min(channels, fit))
    channels = min(channels, T.MAX_SEARCH_CHANNELS)
    channels, s = _duplicate(channels, s, cc)
    return Graph(channels=channels, bw_intra=s, bw_inter=s)


def _tree_nodes(system: NcclSystem, ring: Graph) -> Graph:
    """The ring's channels; the network speed across; inside, up to twice that (pass 2)."""
    cc = system.compute_capability
    devices, dev_bw = _net(system)
    speeds = T.SPEEDS_INTER[_family(cc)]
    total = devices * dev_bw
    inter = _first_at_most(speeds, min(dev_bw, system.pcie_GBps, total / ring.channels))
    intra = inter
    if system.ranks_per_node > 1:
        for s in speeds:
            if inter <= s <= 2 * inter and ring.channels * s <= system.gpu_bandwidth_GBps + 1e-9:
                intra = s
                break
    return Graph(channels=ring.channels, bw_intra=intra, bw_inter=inter)


def _nvls(system: NcclSystem) -> Graph | None:
    if not system.nvls_capable:
        return None
    cc, ppn = system.compute_capability, system.ranks_per_node
    channels = min(T.MAX_NVLS_CHANNELS, ppn)
    speeds = T.SPEEDS_INTRA[_family(cc)]
    intra = _first_at_most(speeds, system.gpu_bandwidth_GBps / (channels + 1))
    if system.nodes == 1:
        inter = min(speeds[0], 2 * intra)
    else:
        _, dev_bw = _net(system)
        inter = _first_at_most(T.SPEEDS_INTER[_family(cc)], min(dev_bw, system.pcie_GBps))
    if channels < 2:
        return None
    return Graph(channels=channels, bw_intra=intra, bw_inter=inter)


def search_graphs(system: NcclSystem) -> Graphs:
    """The ring, tree and NVLS graphs NCCL's search would find for ``system`` (see the module
    docstring for the simplifications)."""
    if system.nodes == 1:
        ring = _ring_one_node(system)
        tree = ring
    else:
        ring = _ring_nodes(system)
        tree = _tree_nodes(system, ring)
    runtime = 2 * min(ring.channels, tree.channels)  # doubled at connection (connect.cc 460)
    if (system.nodes > 1 and system.compute_capability >= 9.0 and ring.bw_intra > 45
            and runtime < 16):  # connect.cc 481-483
        runtime *= 2
    runtime = system.env.runtime_channels(runtime)  # NCCL_MIN/MAX_CTAS, _NCHANNELS (connect.cc 501-505)
    return Graphs(ring=ring, tree=tree, nvls=_nvls(system), runtime_channels=runtime)
