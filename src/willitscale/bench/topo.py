"""Parse ``nvidia-smi topo -m``: which GPUs and NICs reach each other over what (pure).

The matrix names each pair's connection: ``NV#`` (a bonded set of # NVLinks), ``PIX``/``PXB``
(through one or several PCIe switches), ``PHB`` (through a PCIe host bridge), ``NODE``
(between host bridges in one NUMA node), ``SYS`` (across NUMA nodes, over QPI/UPI/xGMI) and
``X`` for the device itself. Columns after the devices give each GPU's CPU and NUMA affinity.
Both the tab-separated output of current drivers and the space-aligned copies found in docs
and articles are accepted.
"""

from __future__ import annotations

import re
from typing import Any

__all__ = ["parse_topo_matrix", "gpu_link_summary"]

_DEVICE = re.compile(r"^(GPU|NIC|NVS|CX|mlx)\w*\d+$")
_NIC_LEGEND = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _header_cells(line: str) -> list[str]:
    if "\t" in line:
        return [c.strip() for c in line.split("\t") if c.strip()]
    return [c.strip() for c in re.split(r"\s{2,}", line.strip()) if c.strip()]


def parse_topo_matrix(text: str) -> dict[str, Any] | None:
    """The matrix as ``{"devices", "links", "affinity", "nics"}``, or None if ``text`` has none.

    ``links[a][b]`` is the connection code from device ``a`` to ``b``; ``affinity[gpu]`` maps
    the extra columns (``"CPU Affinity"``, ``"NUMA Affinity"``, ...) to their values.
    """
    lines = text.splitlines()
    header_at = next((i for i, ln in enumerate(lines) if re.search(r"\bGPU0\b", ln)), None)
    if header_at is None:
        return None
    header = _header_cells(lines[header_at])
    devices = [c for c in header if _DEVICE.match(c)]
    extras = [c for c in header if not _DEVICE.match(c)]
    links: dict[str, dict[str, str]] = {}
    affinity: dict[str, dict[str, str]] = {}
    for line in lines[header_at + 1:]:
        if not line.strip() or line.strip().startswith("Legend"):
            break
        tokens = line.split()
        name, cells = tokens[0], tokens[1:]
        if name not in devices or len(cells) < len(devices):
            continue
        links[name] = dict(zip(devices, cells[: len(devices)], strict=True))
        rest = cells[len(devices):]
        if rest:
            affinity[name] = dict(zip(extras, rest, strict=False))
    nics = {m[1]: m[2] for ln in lines if (m := _NIC_LEGEND.match(ln))}
    if not links:
        return None
    return {"devices": [d for d in devices if d in links], "links": links,
            "affinity": affinity, "nics": nics}


def gpu_link_summary(topo: dict[str, Any] | None) -> str | None:
    """The GPU-to-GPU connections, e.g. ``"NV12"`` when every pair has 12 NVLinks, or
    ``"NV4,SYS"`` when they differ (sorted, distinct); None without two GPUs."""
    if not topo:
        return None
    gpus = [d for d in topo["devices"] if d.startswith("GPU")]
    codes = {topo["links"][a][b] for a in gpus for b in gpus if a != b and b in topo["links"][a]}
    return ",".join(sorted(codes)) if codes else None
