"""What a run ran on: hosts, GPUs, versions, NUMA, network interfaces (read at the edge).

Every rank calls :func:`host_facts` (no torch) and :func:`torch_facts`; the bench gathers them
on rank 0 and keeps one entry per node plus a short entry per rank. Facts that cannot be read
(no ``nvidia-smi``, no ``/sys``) are None or empty, never guessed.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from willitscale.bench.provenance import CLOCK_QUERY, parse_clocks
from willitscale.bench.topo import gpu_link_summary, parse_topo_matrix

__all__ = ["host_facts", "torch_facts", "node_id", "EMULATED_ENV", "summarize_environment"]

#: Set by ``willitscale emulate`` in every emulated node: a JSON object describing the emulation.
EMULATED_ENV = "WILLITSCALE_EMULATED"
NODE_RANK_ENVS = ("GROUP_RANK", "WILLITSCALE_NODE_RANK", "NODE_RANK", "SLURM_NODEID")
SYS_NET = Path("/sys/class/net")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _run(argv: list[str], timeout: float = 15.0) -> str | None:
    if not shutil.which(argv[0]):
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


def node_rank_from_env() -> int | None:
    for name in NODE_RANK_ENVS:
        value = os.environ.get(name)
        if value is not None and value.strip().isdigit():
            return int(value)
    return None


def node_id() -> str:
    """A name that differs between nodes: the hostname, plus the node rank when the launcher
    gives one (an emulated cluster's namespaces, or containers, can share a hostname)."""
    host = socket.gethostname()
    rank = node_rank_from_env()
    return host if rank is None else f"{host}/node{rank}"


def _cpu_model() -> str | None:
    text = _read(Path("/proc/cpuinfo")) or ""
    for line in text.splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or None


def _numa_nodes() -> list[dict[str, Any]]:
    base = Path("/sys/devices/system/node")
    nodes = []
    for path in sorted(base.glob("node[0-9]*"), key=lambda p: int(p.name[4:])):
        nodes.append({"node": int(path.name[4:]), "cpus": _read(path / "cpulist")})
    return nodes


def _qdiscs() -> dict[str, str]:
    """Each interface's root queueing discipline as ``tc`` prints it (shows a shaped rate)."""
    text = _run(["tc", "qdisc", "show"]) or ""
    found: dict[str, str] = {}
    for line in text.splitlines():
        words = line.split()
        if "dev" in words and "root" in words:
            dev = words[words.index("dev") + 1]
            found.setdefault(dev, " ".join(w for i, w in enumerate(words) if i != 2))
    return found


def _interfaces() -> list[dict[str, Any]]:
    qdiscs = _qdiscs()
    out = []
    for path in sorted(SYS_NET.glob("*")) if SYS_NET.exists() else []:
        speed = _read(path / "speed")
        out.append({
            "name": path.name,
            "state": _read(path / "operstate"),
            "mtu": int(m) if (m := _read(path / "mtu")) and m.isdigit() else None,
            "speed_Mbps": int(speed) if speed and speed.lstrip("-").isdigit() and int(speed) > 0 else None,
            "qdisc": qdiscs.get(path.name),
            "device": (path / "device").exists(),  # a physical NIC (not lo, a bridge, a veth)
            "numa_node": _numa_of(path / "device"),
        })
    return out


def _numa_of(device: Path) -> int | None:
    """The NUMA node of a PCI device (``/sys/.../device/numa_node``; -1 or absent: None)."""
    text = _read(device / "numa_node")
    return int(text) if text and text.isdigit() else None


def _infiniband() -> list[dict[str, Any]]:
    base = Path("/sys/class/infiniband")
    ports = []
    for port in sorted(base.glob("*/ports/*")) if base.exists() else []:
        ports.append({"device": port.parent.parent.name, "port": port.name,
                      "rate": _read(port / "rate"), "state": _read(port / "state"),
                      "link_layer": _read(port / "link_layer"),
                      "numa_node": _numa_of(port.parent.parent / "device")})
    return ports


def _nvidia_gpus() -> tuple[list[dict[str, Any]], str | None]:
    text = _run(["nvidia-smi", "--query-gpu=index,name,memory.total,driver_version,pci.bus_id",
                 "--format=csv,noheader,nounits"])
    if not text:
        return [], None
    gpus, driver = [], None
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) < 5:
            continue
        index, name, mem_mib, driver, bus = parts[:5]
        memory = int(float(mem_mib) * 2**20) if mem_mib.replace(".", "").isdigit() else None
        gpus.append({"index": int(index), "name": name, "memory_bytes": memory, "pci_bus": bus})
    return gpus, driver


def _gpu_clocks() -> list[dict[str, Any]]:
    """Each GPU's current and maximum SM and memory clocks (MHz) from nvidia-smi; [] without it."""
    text = _run(["nvidia-smi", "--query-gpu=" + ",".join(CLOCK_QUERY),
                 "--format=csv,noheader,nounits"])
    return parse_clocks(text) if text else []


def host_facts() -> dict[str, Any]:
    """Facts about this host (or emulated node) that need no torch."""
    gpus, driver = _nvidia_gpus()
    topo_text = _run(["nvidia-smi", "topo", "-m"]) if gpus else None
    topo = parse_topo_matrix(topo_text) if topo_text else None
    emulated = os.environ.get(EMULATED_ENV)
    return {
        "node": node_id(),
        "hostname": socket.gethostname(),
        "node_rank": node_rank_from_env(),
        "platform": platform.platform(),
        "python": sys.version.split()[0],
        "cpu": _cpu_model(),
        "cpus": os.cpu_count(),
        "numa": _numa_nodes(),
        "interfaces": _interfaces(),
        "infiniband": _infiniband(),
        "gpus": gpus,
        "driver": driver,
        "gpu_clocks": _gpu_clocks() if gpus else [],
        "topology": topo,
        "gpu_links": gpu_link_summary(topo),
        "emulated": json.loads(emulated) if emulated else None,
        "env": {k: v for k, v in os.environ.items()
                if k.startswith(("NCCL_", "GLOO_", "MASTER_", "SLURM_JOB", "OMP_NUM_THREADS"))},
    }


def torch_facts(torch: Any, backend: str) -> dict[str, Any]:
    """Versions of torch, CUDA, cuDNN and NCCL as this process sees them."""
    nccl = None
    if torch.cuda.is_available():
        try:
            version = torch.cuda.nccl.version()
            nccl = ".".join(map(str, version)) if isinstance(version, tuple) else str(version)
        except (AttributeError, RuntimeError):
            nccl = None
    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.cuda.is_available() else None,
        "nccl": nccl,
        "backend": backend,
        "threads": torch.get_num_threads(),
    }


def summarize_environment(per_rank: list[dict[str, Any]], *, backend: str,
                          device_names: list[str]) -> dict[str, Any]:
    """One environment record from every rank's facts: one entry per node, one line per rank."""
    nodes: dict[str, dict[str, Any]] = {}
    ranks = []
    for rank, facts in enumerate(per_rank):
        host = facts["host"]
        if len(host) > len(nodes.get(host["node"], {})):  # keep the node's full record
            nodes[host["node"]] = {**host, **facts["torch"]}
        ranks.append({"rank": rank, "node": host["node"], "local_rank": facts["local_rank"],
                      "device": device_names[rank] if rank < len(device_names) else None,
                      "pid": facts.get("pid")})
    node_names = list(nodes)
    per_node = [sum(1 for r in ranks if r["node"] == n) for n in node_names]
    first = next(iter(nodes.values()))
    return {
        "world_size": len(per_rank),
        "nodes": len(node_names),
        "ranks_per_node": per_node[0] if len(set(per_node)) == 1 else per_node,
        "backend": backend,
        "devices": sorted(set(filter(None, device_names))),
        "torch": first.get("torch"), "cuda": first.get("cuda"), "nccl": first.get("nccl"),
        "driver": first.get("driver"),
        "emulated": first.get("emulated"),
        "hosts": list(nodes.values()),
        "ranks": ranks,
    }
