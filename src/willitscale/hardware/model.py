"""Hardware as data: GPUs, links, nodes and clusters.

Quantities are SI base units (bytes, bytes/s, seconds, FLOP/s). A link's ``bandwidth`` is
always **one direction**; the duplex figure vendors advertise is ``duplex_bandwidth``.
Every object carries the ``source`` of its numbers.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from willitscale.errors import ConfigError

__all__ = ["DTYPES", "LinkKind", "Gpu", "Link", "Node", "Cluster"]

#: dtypes a GPU's peak may be given for, from widest to narrowest.
DTYPES = ("fp64", "fp32", "tf32", "bf16", "fp16", "fp8", "fp4")


class LinkKind(StrEnum):
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
        return self in (LinkKind.INFINIBAND, LinkKind.ETHERNET, LinkKind.EFA, LinkKind.OMNIPATH)


def _positive(obj: object, name: str, value: float, *, allow_zero: bool = False) -> None:
    if not (value >= 0 if allow_zero else value > 0) or value != value:
        kind = type(obj).__name__
        raise ConfigError(f"{kind} {getattr(obj, 'name', '')!s}: {name}", value,
                          "a number >= 0" if allow_zero else "a number > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Gpu:
    """One accelerator: memory, memory bandwidth and dense peak FLOP/s per dtype."""

    name: str  #: catalog key, e.g. "h100-sxm"
    display_name: str
    vendor: str
    memory: float  #: bytes of HBM
    memory_bandwidth: float  #: bytes/s
    peak_flops: Mapping[str, float]  #: dtype -> dense (not sparsity) FLOP/s
    intra_node_link: str | None = None  #: catalog name of its GPU-to-GPU link, e.g. "nvlink4"
    source: str = ""

    def __post_init__(self) -> None:
        _positive(self, "memory", self.memory)
        _positive(self, "memory_bandwidth", self.memory_bandwidth)
        for dtype, value in self.peak_flops.items():
            if dtype not in DTYPES:
                raise ConfigError(f"Gpu {self.name}: peak_flops dtype", dtype, "one of " + ", ".join(DTYPES))
            _positive(self, f"peak_flops[{dtype}]", value)
        object.__setattr__(self, "peak_flops", MappingProxyType(dict(self.peak_flops)))

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
    can send into the node fabric, all its links together; for NICs it is one port."""

    name: str  #: catalog key, e.g. "nvlink4", "ib-ndr", "roce-400g"
    kind: LinkKind
    bandwidth: float  #: bytes/s, one direction
    latency: float  #: seconds, one hop end to end as a collective library sees it
    efficiency: float  #: fraction of ``bandwidth`` an application achieves (busbw / advertised)
    display_name: str = ""
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", LinkKind(self.kind))
        _positive(self, "bandwidth", self.bandwidth)
        _positive(self, "latency", self.latency, allow_zero=True)
        if not 0 < self.efficiency <= 1:
            raise ConfigError(f"Link {self.name}: efficiency", self.efficiency, "a fraction in (0, 1]")

    @property
    def duplex_bandwidth(self) -> float:
        """Both directions summed: the figure vendors advertise. Never use it for a transfer time."""
        return 2 * self.bandwidth

    @property
    def effective_bandwidth(self) -> float:
        """One-direction bytes/s an application can expect: ``bandwidth x efficiency``."""
        return self.bandwidth * self.efficiency


@dataclass(frozen=True, slots=True, kw_only=True)
class Node:
    """A server: ``gpus_per_node`` GPUs joined by ``intra_link``, and ``nics`` ports of ``nic``."""

    name: str
    gpu: Gpu
    gpus_per_node: int
    intra_link: Link  #: per-GPU bandwidth into the node's GPU fabric (NVLink/NVSwitch, PCIe, ...)
    nic: Link  #: one inter-node port
    nics: int  #: inter-node ports (GPUs share them)
    source: str = ""

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1:
            raise ConfigError(f"Node {self.name}: gpus_per_node", self.gpus_per_node, "an integer >= 1")
        if self.nics < 1:
            raise ConfigError(f"Node {self.name}: nics", self.nics, "an integer >= 1")

    @property
    def inter_node_bandwidth(self) -> float:
        """One-direction bytes/s out of (or into) the node over all its NICs."""
        return self.nics * self.nic.bandwidth


@dataclass(frozen=True, slots=True, kw_only=True)
class Cluster:
    """``nodes`` identical nodes on a network. The fabric's topology lives in ``topology/``."""

    node: Node
    nodes: int
    name: str = ""

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ConfigError("nodes", self.nodes, "an integer >= 1")

    @property
    def gpus(self) -> int:
        return self.nodes * self.node.gpus_per_node

    @property
    def gpu(self) -> Gpu:
        return self.node.gpu
