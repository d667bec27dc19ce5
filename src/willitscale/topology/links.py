"""Link speeds and latencies a fabric is built with, and the defaults used when none are given.

Latency model: a path's latency is the sum of its links' latencies. The GPU<->switch links
each carry half of the NIC's end-to-end latency, so GPU -> leaf -> GPU costs exactly
``nic_latency`` (the one-hop latency a collective library sees, as the hardware catalog's
``Link.latency`` means it); every switch-to-switch link adds ``switch_latency`` (one more
switch traversal plus cable). NVLink likewise: GPU -> NVSwitch -> GPU costs ``nvlink_latency``.
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.errors import ConfigError
from willitscale.units import format_bandwidth, format_time

__all__ = ["FabricLinks", "DEFAULT_LINKS"]


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricLinks:
    """Per-GPU NIC and NVLink speeds (one direction, bytes/s), latencies (s), switch links."""

    #: 400 Gb/s per GPU: one ConnectX-7 port per H100 in a DGX/HGX H100 (the article: "each GPU
    #: capable of sending 400Gbps to the NIC"; NVIDIA DGX H100 datasheet: 8x 400 Gb/s ConnectX-7).
    nic_bandwidth: float = 400e9 / 8
    #: 2.7 us end to end through one switch: the catalog's ib-ndr latency (NCCL src/graph/tuning.cc,
    #: hwLat[NET], ring LL protocol: 2.7 us per hop), printed with every result.
    nic_latency: float = 2.7e-6
    #: NVLink 4 per H100: 18 links x 25 GB/s per direction = 450 GB/s one direction
    #: (NVIDIA H100 datasheet: "900 GB/s" NVLink, which counts both directions; the article:
    #: "3,600Gbps ... in each direction").
    nvlink_bandwidth: float = 450e9
    #: 0.6 us GPU to GPU through the NVSwitch: the catalog's nvlink4 latency (NCCL tuning.cc,
    #: hwLat[NVLINK], ring LL: 0.6 us per hop), printed with every result.
    nvlink_latency: float = 0.6e-6
    #: Added per switch-to-switch link: an assumption (a cut-through switch hop plus optics,
    #: commonly 0.3-1 us).
    switch_latency: float = 0.5e-6
    #: Switch-to-switch link speed; ``None`` means the same as one NIC port.
    uplink_bandwidth: float | None = None
    nic_name: str = "default: 400 Gb/s NIC (ib-ndr, advertised)"
    nvlink_name: str = "default: NVLink 4 (nvlink4, advertised)"

    def __post_init__(self) -> None:
        for name in ("nic_bandwidth", "nvlink_bandwidth"):
            if not getattr(self, name) > 0:
                raise ConfigError(name, getattr(self, name), "a bandwidth > 0")
        for name in ("nic_latency", "nvlink_latency", "switch_latency"):
            if not getattr(self, name) >= 0:
                raise ConfigError(name, getattr(self, name), "a time >= 0")
        if self.uplink_bandwidth is not None and not self.uplink_bandwidth > 0:
            raise ConfigError("uplink_bandwidth", self.uplink_bandwidth, "a bandwidth > 0")

    @property
    def switch_bandwidth(self) -> float:
        return self.nic_bandwidth if self.uplink_bandwidth is None else self.uplink_bandwidth

    @classmethod
    def from_links(cls, *, nic=None, nvlink=None, effective: bool = False, **overrides) -> FabricLinks:
        """From hardware-catalog :class:`~willitscale.hardware.model.Link` objects.

        With ``effective=True`` capacities are ``bandwidth x efficiency`` (what an application
        achieves), as the analytic model uses them.
        """
        kw: dict = {}
        how = "achievable" if effective else "advertised"
        if nic is not None:
            kw.update(nic_bandwidth=nic.effective_bandwidth if effective else nic.bandwidth,
                      nic_latency=nic.latency, nic_name=f"{nic.name} ({how})")
        if nvlink is not None:
            kw.update(nvlink_bandwidth=nvlink.effective_bandwidth if effective else nvlink.bandwidth,
                      nvlink_latency=nvlink.latency, nvlink_name=f"{nvlink.name} ({how})")
        kw.update(overrides)
        return cls(**kw)

    @classmethod
    def from_node(cls, node, *, effective: bool = True, **overrides) -> FabricLinks:
        """From a catalog :class:`~willitscale.hardware.model.Node`: its GPU link per GPU and its NICs
        shared evenly, ``nics x nic / gpus_per_node`` per GPU (one port per GPU on DGX/HGX H100;
        fewer ports are modelled as a slower port per GPU). Achievable (x efficiency) by default,
        as ``willitscale collective --node`` uses them."""
        nic, intra = node.nic, node.intra_link
        share = node.nics / node.gpus_per_node
        factor = nic.efficiency if effective else 1.0
        intra_bw = getattr(node, "usable_intra_bandwidth", intra.bandwidth)
        how = "achievable" if effective else "advertised"
        kw = dict(nic_bandwidth=nic.bandwidth * factor * share, nic_latency=nic.latency,
                  nic_name=f"{node.nics} x {nic.name} per {node.gpus_per_node} GPUs of {node.name} ({how})",
                  nvlink_bandwidth=intra_bw * (intra.efficiency if effective else 1.0),
                  nvlink_latency=intra.latency, nvlink_name=f"{intra.name} of {node.name} ({how})")
        kw.update(overrides)
        return cls(**kw)

    def assumptions(self) -> tuple[str, ...]:
        up = format_bandwidth(self.switch_bandwidth, bits=True)
        return (
            f"NIC per GPU: {self.nic_name}, {format_bandwidth(self.nic_bandwidth, bits=True)} "
            f"({format_bandwidth(self.nic_bandwidth)}) each direction, {format_time(self.nic_latency)} "
            "end to end through one switch",
            f"NVLink per GPU: {self.nvlink_name}, {format_bandwidth(self.nvlink_bandwidth)} each direction, "
            f"{format_time(self.nvlink_latency)} GPU to GPU",
            f"switch-to-switch links: {up} each direction, +{format_time(self.switch_latency)} per hop",
        )


DEFAULT_LINKS = FabricLinks()
