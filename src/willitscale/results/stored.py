"""What the results store hands out: a run's record, a run with its rows, a calibration."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["RunInfo", "StoredRun", "StoredCalibration", "STATUSES", "plain", "frozen"]

#: running: being measured (or its writer died: read back as ``killed``); complete; interrupted
#: (Ctrl-C, SIGTERM: finished rows kept); failed (a rank died, hung or raised: see ``reason``)
STATUSES = ("running", "complete", "interrupted", "failed", "killed")


def plain(obj: Any) -> Any:
    """Plain dicts and lists (JSON's types) from read-only mappings and tuples."""
    if isinstance(obj, Mapping):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


def frozen(obj: Any) -> Any:
    """Read-only mappings and tuples from parsed JSON."""
    if isinstance(obj, dict):
        return MappingProxyType({k: frozen(v) for k, v in obj.items()})
    if isinstance(obj, list):
        return tuple(frozen(v) for v in obj)
    return obj


@dataclass(frozen=True, slots=True, kw_only=True)
class RunInfo:
    """One stored run without its rows."""

    id: int
    kind: str
    started_at: str
    finished_at: str | None
    status: str
    label: str
    options: Mapping[str, Any]
    environment: Mapping[str, Any]
    host: str
    pid: int
    rows: int
    #: why it failed or stopped early ("rank 1 (host a, pid 7) was killed by SIGKILL"); "" if
    #: it did not, or was stored before the store kept reasons (schema version 1)
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "started_at": self.started_at,
                "finished_at": self.finished_at, "status": self.status, "label": self.label,
                "reason": self.reason, "rows": self.rows, "host": self.host, "pid": self.pid,
                "options": plain(self.options), "environment": plain(self.environment)}


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """A run and its rows (as stored JSON objects, in measurement order)."""

    info: RunInfo
    rows: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {**self.info.to_json(), "results": [plain(r) for r in self.rows]}


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCalibration:
    id: int
    created_at: str
    path: str
    runs: tuple[int, ...]
    toml: str
