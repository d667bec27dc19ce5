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
    #: 2 us end to end through one switch: an assumption (RDMA small-message latency over one
    #: InfiniBand/RoCE switch is typically quoted at 1-3 us), printed with every result.
    nic_latency: float = 2e-6
    #: NVLink 4 per H100: 18 links x 25 GB/s per direction = 450 GB/s one direction
    #: (NVIDIA H100 datasheet: "900 GB/s" NVLink, which counts both directions; the article:
    #: "3,600Gbps ... in each direction").
    nvlink_bandwidth: float = 450e9
    #: 1 us GPU to GPU through the NVSwitch: an assumption (printed with every result).
    nvlink_latency: float = 1e-6
    #: Added per switch-to-switch link: an assumption (a cut-through switch hop plus optics,
    #: commonly 0.3-1 us).
    switch_latency: float = 0.5e-6
    #: Switch-to-switch link speed; ``None`` means the same as one NIC port.
    uplink_bandwidth: float | None = None
    nic_name: str = "400Gbps NIC (default)"
    nvlink_name: str = "NVLink 4 (default)"

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
        if nic is not None:
            kw.update(nic_bandwidth=nic.effective_bandwidth if effective else nic.bandwidth,
                      nic_latency=nic.latency, nic_name=nic.name)
        if nvlink is not None:
            kw.update(nvlink_bandwidth=nvlink.effective_bandwidth if effective else nvlink.bandwidth,
                      nvlink_latency=nvlink.latency, nvlink_name=nvlink.name)
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
