"""Facts about a node from saved command output instead of the live machine, for ``willitscale
discover --from DIR`` (pure parsing): what a user pastes from a node they cannot run
willitscale on, or a test's captured outputs.

The folder may hold, each optional:

* ``nvidia-smi-topo.txt``: ``nvidia-smi topo -m`` (parsed by :mod:`willitscale.bench.topo`);
* ``nvidia-smi-q.txt``: ``nvidia-smi -q``: per ``GPU <bus id>`` block, its ``Product Name`` and
  the ``Total`` of ``FB Memory Usage`` (``81559 MiB``);
* ``ibstat.txt``: ``ibstat``: per ``CA '<name>'``, per ``Port N:``, its ``State``, ``Rate``
  (Gb/s) and ``Link layer``;
* ``sys-class-infiniband/``: a copy of ``/sys/class/infiniband`` (``DEVICE/ports/N/rate``,
  ``state``, ``link_layer``), read as the live machine's is; ``ibstat.txt`` wins when both are
  there;
* ``cpuinfo.txt``, ``hostname.txt``: ``/proc/cpuinfo`` and the host's name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from willitscale.bench.topo import parse_topo_matrix

__all__ = ["parse_nvidia_smi_q", "parse_ibstat", "sys_infiniband_ports", "facts_from_captures",
           "FILES"]

FILES = ("nvidia-smi-topo.txt", "nvidia-smi-q.txt", "ibstat.txt", "sys-class-infiniband",
         "cpuinfo.txt", "hostname.txt")
_FIELD = re.compile(r"^(\s*)([^:]+?)\s*:\s*(.*?)\s*$")


def parse_nvidia_smi_q(text: str) -> list[dict[str, Any]]:
    """``[{"index", "name", "memory_bytes", "pci_bus"}]`` from ``nvidia-smi -q``."""
    gpus: list[dict[str, Any]] = []
    section = ""
    for line in text.splitlines():
        head = re.match(r"^GPU ([0-9A-Fa-f:.]+)\s*$", line)
        if head:
            gpus.append({"index": len(gpus), "name": None, "memory_bytes": None,
                         "pci_bus": head[1]})
            continue
        if not gpus:
            continue
        field = _FIELD.match(line)
        if field is None:
            if line.strip():
                section = line.strip()
            continue
        key, value = field[2].strip(), field[3]
        if not value:
            section = key
        elif key == "Product Name" and gpus[-1]["name"] is None:
            gpus[-1]["name"] = value
        elif key == "Total" and section == "FB Memory Usage":
            mib = re.match(r"^(\d+)\s*MiB$", value)
            if mib:
                gpus[-1]["memory_bytes"] = int(mib[1]) * 2**20
    return [g for g in gpus if g["name"]]


def parse_ibstat(text: str) -> list[dict[str, Any]]:
    """InfiniBand ports as :func:`~willitscale.bench.environment.host_facts` lists them."""
    ports: list[dict[str, Any]] = []
    device = None
    for line in text.splitlines():
        ca = re.match(r"^CA '([^']+)'", line.strip())
        if ca:
            device = ca[1]
            continue
        port = re.match(r"^Port (\d+):\s*$", line.strip())
        if port and device:
            ports.append({"device": device, "port": port[1], "rate": None, "state": None,
                          "link_layer": None, "numa_node": None})
            continue
        field = _FIELD.match(line)
        if field and ports and ports[-1]["device"] == device:
            key, value = field[2].strip(), field[3]
            if key == "State":
                ports[-1]["state"] = value.upper()
            elif key == "Rate" and value.replace(".", "", 1).isdigit():
                ports[-1]["rate"] = f"{value} Gb/sec"
            elif key == "Link layer":
                ports[-1]["link_layer"] = value
    return ports


def sys_infiniband_ports(base: Path) -> list[dict[str, Any]]:
    """InfiniBand ports of a copy of ``/sys/class/infiniband`` (``DEVICE/ports/N/...``)."""
    def field(path: Path) -> str | None:
        return path.read_text(errors="replace").strip() if path.is_file() else None

    return [{"device": port.parent.parent.name, "port": port.name, "rate": field(port / "rate"),
             "state": field(port / "state"), "link_layer": field(port / "link_layer"),
             "numa_node": None}
            for port in sorted(base.glob("*/ports/*")) if port.is_dir()]


def facts_from_captures(folder: Path) -> dict[str, Any]:
    """:func:`~willitscale.bench.environment.host_facts`-shaped facts from saved outputs."""
    def read(name: str) -> str | None:
        path = folder / name
        return path.read_text(errors="replace") if path.is_file() else None

    topo = read("nvidia-smi-topo.txt")
    cpuinfo = read("cpuinfo.txt") or ""
    models = [ln.split(":", 1)[1].strip() for ln in cpuinfo.splitlines()
              if ln.lower().startswith("model name")]
    return {"hostname": (read("hostname.txt") or folder.name).strip(),
            "cpu": models[0] if models else None, "cpus": len(models) or None, "numa": [],
            "gpus": parse_nvidia_smi_q(read("nvidia-smi-q.txt") or ""),
            "topology": parse_topo_matrix(topo) if topo else None,
            "infiniband": (parse_ibstat(read("ibstat.txt") or "")
                           or sys_infiniband_ports(folder / "sys-class-infiniband")),
            "interfaces": [],
            "peermem": None, "captured_from": str(folder)}
