"""Catalog TOML tables -> :mod:`willitscale.hardware.model` objects.

Each reader takes one ``[gpu.NAME]`` / ``[link.NAME]`` / ``[switch.NAME]`` / ``[node.NAME]`` table
as a :class:`~willitscale.config.Table`, consumes its keys with unit-named spellings
(``memory_GiB``, ``lane_rate_Gbps``, ``latency_us``, ``bandwidth = "200Gbps"``) and ends with
``Table.done()``, so a typo names the file, the entry and the key. Cross references (a node's
GPU, a GPU's link) are resolved through a ``resolve(kind, name)`` callable supplied by the
catalog, which applies aliases and raises :class:`~willitscale.errors.UnknownNameError`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from willitscale.config import Table
from willitscale.errors import ConfigError
from willitscale.hardware.model import (
    DTYPES,
    INTRA_TOPOLOGIES,
    Gpu,
    Link,
    LinkKind,
    Node,
    Switch,
)
from willitscale.units import BITS_PER_BYTE, parse_bandwidth, parse_size, parse_time

__all__ = ["LinkDefaults", "encoding_efficiency", "read_defaults", "read_link", "read_switch",
           "read_gpu", "read_node"]

GBIT = 1e9 / BITS_PER_BYTE  # bytes/s in one Gb/s
TFLOPS = 1e12
Resolve = Callable[[str, str], Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkDefaults:
    """Latency and achievable fraction assumed for every link of one kind unless it says otherwise."""

    kind: LinkKind
    latency: float  #: seconds per hop
    efficiency: float  #: fraction of the one-direction bandwidth an application reaches
    latency_source: str
    efficiency_source: str


_RATIO_RE = re.compile(r"(\d+)\s*([bB])\s*/\s*(\d+)\s*\2")
_RS_RE = re.compile(r"RS\(\s*(\d+)\s*,\s*(\d+)\s*\)")


def _memory_size(value, **kwargs) -> float:
    """A memory capacity: bytes only (``80Gb`` would be 10 GB of bits: refused, see parse_size)."""
    return parse_size(value, bits=False, **kwargs)


def encoding_efficiency(encoding: str) -> float:
    """Data fraction of a line code: ``"128b/130b"`` -> 128/130; ``"242B/256B"`` (PCIe 6 FLIT)
    -> 242/256; ``"256b/257b+RS(544,514)"`` -> 256/257 x 514/544. Terms multiply."""
    fraction, found = 1.0, False
    for data, _, total in _RATIO_RE.findall(encoding):
        fraction *= int(data) / int(total)
        found = True
    for total, data in _RS_RE.findall(encoding):
        fraction *= int(data) / int(total)
        found = True
    if not found or not 0 < fraction <= 1:
        raise ConfigError("encoding", encoding, "a line code such as 128b/130b, 242B/256B or "
                          "256b/257b+RS(544,514)")
    return fraction


def _notes(t: Table) -> tuple[str, ...]:
    raw = t.get("notes", lambda v: [v] if isinstance(v, str) else list(v),
                "a string or a list of strings", [])
    if not all(isinstance(n, str) for n in raw):
        raise ConfigError(f"{t.where}: notes", raw, "a string or a list of strings")
    return tuple(raw)


def _optional_int(t: Table, key: str) -> int | None:
    return t.int(key, None, min=1)


def read_defaults(kind: str, t: Table) -> LinkDefaults:
    """``[defaults.KIND]``: ``latency_us``, ``efficiency`` and a source for each."""
    try:
        link_kind = LinkKind(kind)
    except ValueError:
        raise ConfigError(f"{t.where}: link kind", kind, "one of " + ", ".join(k.value for k in LinkKind)) from None
    defaults = LinkDefaults(
        kind=link_kind,
        latency=t.quantity("latency", parse_time, {"latency_us": 1e-6}),
        efficiency=t.float("efficiency", min=0, max=1, positive=True),
        latency_source=t.str("latency_source"),
        efficiency_source=t.str("efficiency_source"),
    )
    t.done()
    return defaults


def _lane_rate(t: Table) -> float | None:
    """Bytes/s per lane: given as ``lane_rate_Gbps``, or derived from signaling and encoding
    (and then checked against ``lane_rate_Gbps`` when both are given)."""
    given = t.float("lane_rate_Gbps", None, positive=True)
    signaling = t.float("signaling_Gbps", None, positive=True)
    encoding = t.str("encoding", "")
    if signaling is None or not encoding:
        return None if given is None else given * GBIT
    derived = signaling * encoding_efficiency(encoding)
    if given is not None and abs(derived - given) > 5e-3 * given:
        raise ConfigError(f"{t.where}: signaling_Gbps x encoding = {signaling:g} x {encoding} = "
                          f"{derived:.6g} Gb/s per lane, but lane_rate_Gbps = {given:g}")
    return derived * GBIT


def read_link(name: str, t: Table, defaults: LinkDefaults | None) -> Link:
    """``[link.NAME]``: a kind, a bandwidth (``links x lanes x lane rate`` or a quantity), and
    optionally its own latency/efficiency (else the kind's defaults)."""
    kind = t.str("kind", choices=iter([k.value for k in LinkKind if k is not LinkKind.GENERIC]))
    links, lanes = _optional_int(t, "links"), _optional_int(t, "lanes")
    lane_rate = _lane_rate(t)
    signaling = t.float("signaling_Gbps", None)
    given = t.quantity("bandwidth", parse_bandwidth,
                       {"bandwidth_Gbps": GBIT, "bandwidth_GBps": 1e9}, default=None)
    if lane_rate is not None and lanes is not None:
        bandwidth = (links or 1) * lanes * lane_rate
        if given is not None and abs(given - bandwidth) > 1e-6 * bandwidth:
            raise ConfigError(f"{t.where}: bandwidth {given:.6g} B/s disagrees with links x lanes x "
                              f"lane rate = {bandwidth:.6g} B/s")
    elif given is not None:
        bandwidth = given
    else:
        raise ConfigError(f"{t.where}: give lanes with lane_rate_Gbps (or signaling_Gbps and encoding), "
                          "or a bandwidth such as bandwidth = \"200Gbps\"")
    if defaults is None:
        raise ConfigError(f"{t.where}: no [defaults.{kind}] table gives latency and efficiency")
    latency = t.quantity("latency", parse_time, {"latency_us": 1e-6}, default=None)
    efficiency = t.float("efficiency", None, min=0, max=1, positive=True)
    link = Link(
        name=name, kind=LinkKind(kind), bandwidth=bandwidth,
        latency=defaults.latency if latency is None else latency,
        efficiency=defaults.efficiency if efficiency is None else efficiency,
        display_name=t.str("display_name", name), source=t.str("source"),
        links=links, lanes=lanes, lane_rate=lane_rate,
        signaling_rate=None if signaling is None else signaling * 1e9,
        encoding=t.str("encoding", ""), advertised=t.str("advertised", ""),
        latency_source=t.str("latency_source", "" if latency is not None else defaults.latency_source),
        efficiency_source=t.str("efficiency_source",
                                "" if efficiency is not None else defaults.efficiency_source),
        topology=t.str("topology", "", choices=iter(INTRA_TOPOLOGIES)), notes=_notes(t),
    )
    if latency is not None and not link.latency_source:
        raise ConfigError(f"{t.where}: latency_us is given without latency_source")
    if efficiency is not None and not link.efficiency_source:
        raise ConfigError(f"{t.where}: efficiency is given without efficiency_source")
    t.done()
    return link


def read_switch(name: str, t: Table, resolve: Resolve) -> Switch:
    """``[switch.NAME]``: ``ports`` NVLink ports of the generation ``port_link``."""
    port_link: Link = resolve("link", t.str("port_link"))
    switch = Switch(
        name=name, display_name=t.str("display_name", name), ports=t.int("ports", min=1),
        port_bandwidth=port_link.link_bandwidth, port_link=port_link.name,
        in_network_reduction=t.bool("in_network_reduction", False),
        source=t.str("source"), notes=_notes(t),
    )
    t.done()
    return switch


def _flops(t: Table, key: str) -> dict[str, float]:
    if key not in t:
        t.get(key, lambda v: v, "", None)  # mark as read
        return {}
    sub = t.table(key)
    out = {dtype: sub.float(dtype, positive=True) * TFLOPS for dtype in list(sub.keys())
           if dtype in DTYPES}
    sub.done()  # names an unknown dtype, suggesting the closest
    return out


def read_gpu(name: str, t: Table, resolve: Resolve) -> Gpu:
    """``[gpu.NAME]``: memory, bandwidth, dense ``peak_TFLOPS`` per dtype and its standard links."""
    link = t.str("intra_node_link", None)
    nvswitch = t.str("nvswitch", None)
    nic = t.str("default_nic", None)
    gpu = Gpu(
        name=name, display_name=t.str("display_name", name), vendor=t.str("vendor"),
        memory=t.quantity("memory", _memory_size, {"memory_GiB": 2.0**30, "memory_GB": 1e9},
                          positive=True),
        memory_bandwidth=t.quantity("memory_bandwidth", parse_bandwidth,
                                    {"memory_bandwidth_GBps": 1e9, "memory_bandwidth_TBps": 1e12}),
        peak_flops=_flops(t, "peak_TFLOPS"), sparse_peak_flops=_flops(t, "sparse_peak_TFLOPS"),
        intra_node_link=None if link is None else resolve("link", link).name,
        nvswitch=None if nvswitch is None else resolve("switch", nvswitch).name,
        default_nic=None if nic is None else _inter_node(resolve("link", nic), t.where).name,
        intra_topology=t.str("intra_topology", "", choices=iter(INTRA_TOPOLOGIES)),
        form_factor=t.str("form_factor", ""), memory_type=t.str("memory_type", ""),
        source=t.str("source"), notes=_notes(t),
    )
    if not gpu.peak_flops:
        raise ConfigError(f"{t.where}: peak_TFLOPS needs at least one dtype ({', '.join(DTYPES)})")
    t.done()
    return gpu


def _inter_node(link: Link, where: str) -> Link:
    if not link.kind.inter_node:
        raise ConfigError(f"{where}: {link.name} is a {link.kind.value} link, not a NIC port")
    return link


def _with_measured(link: Link, t: Table, prefix: str, node: str) -> Link:
    """A node's own measured efficiency/latency for one of its links, each with its source."""
    efficiency = t.float(f"{prefix}_efficiency", None, min=0, max=1, positive=True)
    latency = t.quantity(f"{prefix}_latency", parse_time, {f"{prefix}_latency_us": 1e-6}, default=None)
    changes: dict[str, Any] = {}
    if efficiency is not None:
        changes.update(efficiency=efficiency, efficiency_source=t.str(f"{prefix}_efficiency_source"))
    if latency is not None:
        changes.update(latency=latency, latency_source=t.str(f"{prefix}_latency_source"))
    if not changes:
        return link
    return replace(link, display_name=f"{link.display_name} (as measured on {node})", **changes)


def read_node(name: str, t: Table, resolve: Resolve) -> Node:
    """``[node.NAME]``: GPU, its count and links, NICs, and optional measured link overrides."""
    intra: Link = resolve("link", t.str("intra_link"))
    if intra.kind.inter_node:
        raise ConfigError(f"{t.where}: intra_link {intra.name} is a {intra.kind.value} NIC port, "
                          "not a GPU-to-GPU link")
    nic = _inter_node(resolve("link", t.str("nic")), f"{t.where}: nic")
    switch_name = t.str("nvswitch", None)
    node = Node(
        name=name, display_name=t.str("display_name", name),
        gpu=resolve("gpu", t.str("gpu")), gpus_per_node=t.int("gpus_per_node", min=1),
        intra_link=_with_measured(intra, t, "intra", name), nic=_with_measured(nic, t, "nic", name),
        nics=t.int("nics", min=1), intra_topology=t.str("intra_topology", "", choices=iter(INTRA_TOPOLOGIES)),
        nvswitch=None if switch_name is None else resolve("switch", switch_name),
        nvswitches=t.int("nvswitches", 0, min=0), source=t.str("source"), notes=_notes(t),
    )
    t.done()
    return node
