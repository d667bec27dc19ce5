"""Hardware as data: GPUs, links, nodes and clusters.

Quantities are SI base units (bytes, bytes/s, seconds, FLOP/s). A link's ``bandwidth`` is
always **one direction**; the duplex figure vendors advertise is ``duplex_bandwidth``.
Every object carries the ``source`` of its numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType

from willitscale import units
from willitscale.errors import ConfigError

__all__ = ["DTYPES", "INTRA_TOPOLOGIES", "LinkKind", "Gpu", "Link", "Switch", "Node", "Cluster"]

#: dtypes a GPU's peak may be given for, from widest to narrowest.
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")

#: How the GPUs of one node are wired to each other:
#:
#: * ``nvswitch``: every GPU's links go to NVSwitch chips; any pair (and all pairs at once) can use
#:   a GPU's full ``intra_link.bandwidth`` (DGX/HGX A100, H100, B200).
#: * ``full-mesh``: each GPU has direct links to every other GPU, split evenly; one pair gets
#:   ``bandwidth / (gpus_per_node - 1)`` (MI300X's 7 Infinity Fabric links; 4-GPU HGX A100).
#: * ``hybrid-cube-mesh``: DGX-1's 8 V100s, not fully connected (some pairs have no direct link).
#: * ``bridge-pairs``: NVLink bridges join GPUs two by two (PCIe cards with a bridge).
#: * ``pcie``: GPU-to-GPU traffic crosses PCIe switches or the CPU's root complex.
INTRA_TOPOLOGIES = ("nvswitch", "full-mesh", "hybrid-cube-mesh", "bridge-pairs", "pcie")


class LinkKind(StrEnum):
    """What a link is made of; decides its default latency and efficiency."""

    NVLINK = "nvlink"
    NVSWITCH = "nvswitch"
    PCIE = "pcie"
    INFINITY_FABRIC = "infinity_fabric"
    INFINIBAND = "infiniband"
    ETHERNET = "ethernet"  # RoCE and plain TCP both
    EFA = "efa"
    OMNIPATH = "omnipath"
    GENERIC = "generic"  # a bare bandwidth given on the command line

    @property
    def inter_node(self) -> bool:
        """True for NIC ports (InfiniBand, Ethernet, EFA, Omni-Path)."""
        return self in (LinkKind.INFINIBAND, LinkKind.ETHERNET, LinkKind.EFA, LinkKind.OMNIPATH)


def _positive(obj: object, name: str, value: float, *, allow_zero: bool = False) -> None:
    if not (value >= 0 if allow_zero else value > 0) or value != value:
        kind = type(obj).__name__
        raise ConfigError(f"{kind} {getattr(obj, 'name', '')!s}: {name}", value,
                          "a number >= 0" if allow_zero else "a number > 0")


#: the largest cluster any command models: 2^20 GPUs, about ten times today's largest training
#: clusters (the planner places the ranks of awkward sizes one by one: O(GPUs) memory)
MAX_GPUS = 2**20
#: physical ranges: a value outside is a typo (a 1e-30 Gb/s or a 1 EB/s link), not hardware.
#: (low, high, formatter, what the range covers); generous on both sides of every real device:
#: emulated links run at 10 Mb/s, NVLink 5 at 900 GB/s one way, HBM at ~8 TB/s, a GPU at
#: ~10 PFLOP/s sparse FP4.
PHYSICAL = {
    "bandwidth": (1e3 / 8, 1e15, "format_bandwidth", "1 kb/s to 1 PB/s"),
    "latency": (0.0, 10.0, "format_time", "0 to 10 s"),
    "memory": (2.0**20, 2.0**50, "format_size", "1 MiB to 1 PiB"),
    "flops": (1e6, 1e18, "format_flop_rate", "1 MFLOP/s to 1 EFLOP/s"),
}


def _physical(obj: object, name: str, value: float, quantity: str) -> None:
    """``value`` within :data:`PHYSICAL`'s range for ``quantity``, else the error that says so."""
    low, high, formatter, text = PHYSICAL[quantity]
    if low <= value <= high:
        return
    shown = getattr(units, formatter)(value)
    raise ConfigError(f"{type(obj).__name__} {getattr(obj, 'name', '')!s}: {name}", shown,
                      f"a {quantity} of {text}: {shown} is a typo, not hardware")


def _frozen_mapping(obj: object, name: str) -> None:
    object.__setattr__(obj, name, MappingProxyType(dict(getattr(obj, name))))


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """One accelerator: memory, memory bandwidth and dense peak FLOP/s per dtype.

    ``peak_flops`` is always the dense figure. Vendors headline the 2:4 structured-sparsity
    figure, exactly twice the dense one; it is kept in ``sparse_peak_flops`` for reference only
    (training does not run sparse matmuls).
    """

    name: str  #: catalog key, e.g. "h100-sxm"
    display_name: str
    vendor: str
    memory: float  #: bytes of HBM (vendors' "80GB" of HBM is 80 GiB)
    memory_bandwidth: float  #: bytes/s
    peak_flops: Mapping[str, float]  #: dtype -> dense (not sparsity) FLOP/s
    intra_node_link: str | None = None  #: catalog name of its GPU-to-GPU link, e.g. "nvlink4"
    source: str = ""
    sparse_peak_flops: Mapping[str, float] = field(default_factory=dict)  #: 2:4 sparsity, not used
    form_factor: str = ""  #: "SXM5", "PCIe", "OAM", ...
    memory_type: str = ""  #: "HBM3", ...
    intra_topology: str = ""  #: how its standard 8-GPU baseboard is wired (see INTRA_TOPOLOGIES)
    nvswitch: str | None = None  #: catalog name of the NVSwitch on its standard baseboard
    default_nic: str | None = None  #: catalog name of the NIC its reference servers carry
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        _positive(self, "memory", self.memory)
        _positive(self, "memory_bandwidth", self.memory_bandwidth)
        _physical(self, "memory", self.memory, "memory")
        _physical(self, "memory_bandwidth", self.memory_bandwidth, "bandwidth")
        for table in ("peak_flops", "sparse_peak_flops"):
            for dtype, value in getattr(self, table).items():
                if dtype not in DTYPES:
                    raise ConfigError(f"Gpu {self.name}: {table} dtype", dtype, "one of " + ", ".join(DTYPES))
                _positive(self, f"{table}[{dtype}]", value)
                _physical(self, f"{table}[{dtype}]", value, "flops")
            _frozen_mapping(self, table)
        for dtype, sparse in self.sparse_peak_flops.items():
            dense = self.peak_flops.get(dtype)
            if dense is None or not dense < sparse:
                raise ConfigError(f"Gpu {self.name}: sparse_peak_flops[{dtype}]", sparse,
                                  f"a figure above the dense peak ({dense}); is dense/sparse swapped?")
        if self.intra_topology and self.intra_topology not in INTRA_TOPOLOGIES:
            raise ConfigError(f"Gpu {self.name}: intra_topology", self.intra_topology,
                              "one of " + ", ".join(INTRA_TOPOLOGIES))
        object.__setattr__(self, "notes", tuple(self.notes))

    def peak(self, dtype: str) -> float:
        """Dense peak FLOP/s for ``dtype``; a clear error if this GPU has no such figure."""
        try:
            return self.peak_flops[dtype]
        except KeyError:
            raise ConfigError(f"dtype (for GPU {self.name})", dtype,
                              "one of " + ", ".join(self.peak_flops)) from None


@dataclass(frozen=True, slots=True, kw_only=True)
class Link:
    """A kind of link. For GPU links (NVLink, PCIe, Infinity Fabric) ``bandwidth`` is what one GPU
    can send into the node fabric, all its links together; for NICs it is one port.

    When the physical breakdown is known, ``bandwidth = links x lanes x lane_rate`` (one
    direction; ``links`` is 1 for a PCIe slot or a NIC port) and construction checks it.
    """

    name: str  #: catalog key, e.g. "nvlink4", "ib-ndr", "roce-400g"
    kind: LinkKind
    bandwidth: float  #: bytes/s, one direction
    latency: float  #: seconds, one hop end to end as a collective library sees it
    efficiency: float  #: fraction of ``bandwidth`` an application achieves (busbw / advertised)
    display_name: str = ""
    source: str = ""
    links: int | None = None  #: links per GPU (NVLink, Infinity Fabric); None for a slot or port
    lanes: int | None = None  #: lanes per link (or per slot/port), one direction
    lane_rate: float | None = None  #: bytes/s of data per lane, one direction, after encoding
    signaling_rate: float | None = None  #: bits/s per lane on the wire, before encoding
    encoding: str = ""  #: line code / FEC, e.g. "128b/130b"
    advertised: str = ""  #: the vendor's own headline figure, verbatim, with its direction
    latency_source: str = ""
    efficiency_source: str = ""
    topology: str = ""  #: the node wiring this link implies, if any ("bridge-pairs", "full-mesh")
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LinkKind(self.kind))
        if self.topology and self.topology not in INTRA_TOPOLOGIES:
            raise ConfigError(f"Link {self.name}: topology", self.topology,
                              "one of " + ", ".join(INTRA_TOPOLOGIES))
        _positive(self, "bandwidth", self.bandwidth)
        _positive(self, "latency", self.latency, allow_zero=True)
        _physical(self, "bandwidth", self.bandwidth, "bandwidth")
        _physical(self, "latency", self.latency, "latency")
        if not 0 < self.efficiency <= 1:
            raise ConfigError(f"Link {self.name}: efficiency", self.efficiency, "a fraction in (0, 1]")
        for key in ("links", "lanes"):
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(f"Link {self.name}: {key}", value, "an integer >= 1")
        if self.lane_rate is not None:
            _positive(self, "lane_rate", self.lane_rate)
            if self.lanes is not None:
                derived = (self.links or 1) * self.lanes * self.lane_rate
                if abs(derived - self.bandwidth) > 1e-6 * self.bandwidth:
                    raise ConfigError(
                        f"Link {self.name}: bandwidth {self.bandwidth:.6g} B/s does not match "
                        f"links x lanes x lane_rate = {self.links or 1} x {self.lanes} x "
                        f"{self.lane_rate:.6g} = {derived:.6g} B/s")
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def duplex_bandwidth(self) -> float:
        """Both directions summed: the figure vendors advertise. Never use it for a transfer time."""
        return 2 * self.bandwidth

    @property
    def effective_bandwidth(self) -> float:
        """One-direction bytes/s an application can expect: ``bandwidth x efficiency``."""
        return self.bandwidth * self.efficiency

    @property
    def link_bandwidth(self) -> float:
        """One-direction bytes/s of one link (one NVLink; the whole slot or port otherwise)."""
        return self.bandwidth / (self.links or 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class Switch:
    """An NVSwitch chip: ``ports`` NVLink ports, each ``port_bandwidth`` bytes/s one direction."""

    name: str  #: catalog key, e.g. "nvswitch-v3"
    display_name: str
    ports: int
    port_bandwidth: float  #: bytes/s, one direction, per port (one NVLink)
    port_link: str = ""  #: catalog name of the NVLink generation of its ports
    in_network_reduction: bool = False  #: NVLink SHARP (NVLS): the switch can sum data itself
    source: str = ""
    notes: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if isinstance(self.ports, bool) or not isinstance(self.ports, int) or self.ports < 1:
            raise ConfigError(f"Switch {self.name}: ports", self.ports, "an integer >= 1")
        _positive(self, "port_bandwidth", self.port_bandwidth)
        _physical(self, "port_bandwidth", self.port_bandwidth, "bandwidth")
        object.__setattr__(self, "notes", tuple(self.notes))

    @property
    def bandwidth(self) -> float:
        """One-direction bytes/s through all ports together."""
        return self.ports * self.port_bandwidth

    @property
    def duplex_bandwidth(self) -> float:
        """Both directions summed, as NVIDIA quotes a switch's bandwidth."""
        return 2 * self.bandwidth


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """A server: ``gpus_per_node`` GPUs joined by ``intra_link``, and ``nics`` ports of ``nic``.

    ``intra_topology`` says how the GPUs are wired (see :data:`INTRA_TOPOLOGIES`); left empty it
    is ``nvswitch`` when ``nvswitch`` is given, ``pcie`` for a PCIe link and ``full-mesh``
    otherwise.
    """

    name: str
    gpu: Gpu
    gpus_per_node: int
    intra_link: Link  #: per-GPU bandwidth into the node's GPU fabric (NVLink/NVSwitch, PCIe, ...)
    nic: Link  #: one inter-node port
    nics: int  #: inter-node ports (GPUs share them)
    source: str = ""
    display_name: str = ""
    intra_topology: str = ""
    nvswitch: Switch | None = None
    nvswitches: int = 0  #: NVSwitch chips in the node
    board_gpus: int = 0  #: GPUs physically in the node (0: = gpus_per_node); a job may use fewer
    notes: tuple[str, ...] = ()  #: caveats about this node's numbers, shown in reports

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ConfigError(f"Node {self.name}: gpus_per_node", self.gpus_per_node, "an integer >= 1")
        if self.nics < 1:
            raise ConfigError(f"Node {self.name}: nics", self.nics, "an integer >= 1")
        object.__setattr__(self, "notes", tuple(self.notes))
        if not self.board_gpus:
            object.__setattr__(self, "board_gpus", self.gpus_per_node)
        if not self.intra_topology:
            default = ("nvswitch" if self.nvswitch is not None
                       else "pcie" if self.intra_link.kind is LinkKind.PCIE else "full-mesh")
            object.__setattr__(self, "intra_topology", default)
        self._check_topology()

    def _check_topology(self) -> None:
        topo, board, links = self.intra_topology, self.board_gpus, self.intra_link.links
        where = f"Node {self.name}: intra_topology"
        if topo not in INTRA_TOPOLOGIES:
            raise ConfigError(where, topo, "one of " + ", ".join(INTRA_TOPOLOGIES))
        if self.nvswitch is not None and self.nvswitches < 1:
            raise ConfigError(f"Node {self.name}: nvswitches", self.nvswitches, "an integer >= 1")
        if self.gpus_per_node > board:
            raise ConfigError(f"Node {self.name}: gpus_per_node", self.gpus_per_node,
                              f"at most the {board} GPUs the node has (board_gpus)")
        if topo == "full-mesh" and links is not None and board - 1 > links:
            raise ConfigError(
                f"Node {self.name}: {board} GPUs cannot be fully meshed with {links} "
                f"{self.intra_link.name} links per GPU (at most {links + 1} GPUs); "
                "use fewer GPUs per node, an NVSwitch node or PCIe")
        if topo == "bridge-pairs" and board > 2:
            raise ConfigError(where, topo, f"at most 2 GPUs per NVLink bridge, not {board}")
        if topo == "hybrid-cube-mesh" and board > 8:
            raise ConfigError(where, topo, f"at most 8 GPUs (DGX-1 wiring), not {board}")

    @property
    def inter_node_bandwidth(self) -> float:
        """One-direction bytes/s out of (or into) the node over all its NICs."""
        return self.nics * self.nic.bandwidth

    @property
    def peer_bandwidth(self) -> float | None:
        """One-direction bytes/s between one pair of GPUs when only that pair talks.

        The full per-GPU bandwidth through NVSwitch or PCIe; on a full mesh, only the links that
        join the pair (``links // (board_gpus - 1)`` of them: 4 NVLinks on a 4-GPU HGX A100).
        ``None`` for a hybrid cube mesh, where it depends on the pair (ask topology).
        """
        if self.intra_topology == "full-mesh" and self.board_gpus > 1:
            links = self.intra_link.links
            if links is None:
                return self.intra_link.bandwidth / (self.board_gpus - 1)
            return self.intra_link.link_bandwidth * (links // (self.board_gpus - 1))
        if self.intra_topology == "hybrid-cube-mesh":
            return None
        return self.intra_link.bandwidth

    @property
    def usable_intra_bandwidth(self) -> float:
        """One-direction bytes/s one GPU can drive to the other GPUs of the job in this node.

        On a full mesh only the links to GPUs in use count (2 GPUs of a 4-GPU HGX A100: 4 of 12
        NVLinks); through NVSwitch or PCIe it is the GPU's whole ``intra_link.bandwidth``.
        """
        peer = self.peer_bandwidth
        if self.intra_topology == "full-mesh" and peer is not None:
            return min(self.intra_link.bandwidth, peer * max(self.gpus_per_node - 1, 1))
        return self.intra_link.bandwidth


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """``nodes`` identical nodes on a network. The fabric's topology lives in ``topology/``.

    ``assumptions`` lists every default that was filled in to build it (a NIC nobody named,
    the latency of a bare bandwidth, ...) so a report can say what it assumed; ``warnings`` the
    choices worth a second look (a node larger than any shipped board).
    """

    node: Node
    nodes: int
    name: str = ""
    assumptions: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ConfigError("nodes", self.nodes, "an integer >= 1")
        if self.nodes * self.node.gpus_per_node > MAX_GPUS:
            raise ConfigError("nodes", self.nodes,
                              f"at most {MAX_GPUS // self.node.gpus_per_node:,} nodes of "
                              f"{self.node.gpus_per_node} GPUs ({MAX_GPUS:,} GPUs, about ten "
                              "times today's largest training clusters)")
        object.__setattr__(self, "assumptions", tuple(self.assumptions))
        object.__setattr__(self, "warnings", tuple(self.warnings))

    @property
    def gpus(self) -> int:
        return self.nodes * self.node.gpus_per_node

    @property
    def gpu(self) -> Gpu:
        return self.node.gpu
