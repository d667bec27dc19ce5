"""A stored run as calibration sees it: its setup in a few typed fields and its typed rows."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from willitscale.errors import ConfigError
from willitscale.results.records import row_from_json
from willitscale.units import format_bandwidth

__all__ = ["MeasuredRun", "measured_run", "run_from_environment", "TORCH_TO_DTYPE"]

#: torch dtype names -> the hardware catalog's (hardware.model.DTYPES)
TORCH_TO_DTYPE = {"float32": "fp32", "bfloat16": "bf16", "float16": "fp16", "float64": "fp64"}


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredRun:
    """One stored benchmark run."""

    id: int
    kind: str
    started_at: str
    backend: str
    ranks: int
    nodes: int
    ranks_per_node: int
    devices: tuple[str, ...]
    uplink: float | None  #: the emulated cluster's shaped rate (bytes/s), None on a real one
    rows: tuple[Any, ...]
    #: NICs per node: 1 on the emulated cluster (one shaped uplink per node), else the NICs of
    #: the nodes' ``nvidia-smi topo -m`` when recorded and the same on every node, else None
    nics: int | None = None
    #: NCCL_ALGO / NCCL_PROTO the run set (the same on every node), "" when unset or mixed
    nccl_algo: str = ""
    nccl_proto: str = ""

    @property
    def level(self) -> str:
        """Which links the run's traffic crosses: ``intra_node`` (one node), ``inter_node``
        (one rank per node) or ``two_level`` (several nodes of several ranks)."""
        if self.nodes == 1:
            return "intra_node"
        return "inter_node" if self.ranks_per_node == 1 else "two_level"

    @property
    def setup(self) -> str:
        text = f"{self.backend}, {'/'.join(self.devices) or '?'}"
        if self.uplink:
            text += f", emulated uplink {format_bandwidth(self.uplink, bits=True)}"
        return text


def measured_run(stored) -> MeasuredRun:
    """From a :class:`~willitscale.results.store.StoredRun`."""
    info = stored.info
    return run_from_environment(info.environment, kind=info.kind, rows=stored.rows, id=info.id,
                                started_at=info.started_at)


def run_from_environment(env, *, kind: str, rows=(), id: int = 0, started_at: str = "") -> MeasuredRun:
    """From a run's environment record (``bench``'s, before or without storing it) and its rows
    as JSON records."""
    rpn = env.get("ranks_per_node")
    if not isinstance(rpn, int):
        raise ConfigError(f"run {id} has uneven ranks per node ({rpn}); it cannot be calibrated")
    emulated = env.get("emulated") or {}
    return MeasuredRun(
        id=id, kind=kind, started_at=started_at, backend=env.get("backend", ""),
        ranks=int(env.get("world_size", 0)), nodes=int(env.get("nodes", 0)), ranks_per_node=rpn,
        devices=tuple(env.get("devices") or ()), uplink=emulated.get("uplink_Bps"),
        rows=tuple(row_from_json(kind, r) for r in rows), nics=_nics(env, emulated),
        nccl_algo=_host_env(env, "NCCL_ALGO"), nccl_proto=_host_env(env, "NCCL_PROTO"))


def _host_env(env: dict, name: str) -> str:
    """The value of ``name`` every node of the run recorded ("" when unset on any or mixed)."""
    values = {str(((host.get("env") or {}).get(name)) or "") for host in env.get("hosts") or ()}
    return values.pop() if len(values) == 1 else ""


def _nics(env: dict, emulated: dict) -> int | None:
    """NICs per node of a run's environment (see :attr:`MeasuredRun.nics`)."""
    if emulated:
        return 1
    counts = {len((host.get("topology") or {}).get("nics") or {}) for host in env.get("hosts") or ()}
    counts.discard(0)
    return counts.pop() if len(counts) == 1 else None
