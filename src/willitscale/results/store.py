"""The local results store: every benchmark run and each of its rows, in SQLite.

Where: ``$WILLITSCALE_HOME/results.sqlite`` when ``WILLITSCALE_HOME`` is set, else the platform's
user data folder (``platformdirs.user_data_dir("willitscale")``).

Durability: the database is in WAL mode (rollback-journal mode on a network filesystem, where
WAL's shared-memory index cannot be shared between hosts; see :func:`journal_mode_for`) and
every row is committed on its own, as soon as it is measured, so an interrupted sweep (Ctrl-C, a crash, SIGKILL) keeps every finished row, and
several benchmarks writing at once wait for each other (``busy_timeout``) instead of failing or
losing rows. A run records the host and pid that wrote it: a run still marked ``running`` whose
writer is gone is reported as ``killed``.
"""

from __future__ import annotations

import functools
import json
import os
import socket
import sqlite3
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

from willitscale.errors import ConfigError

__all__ = ["Store", "ResultsStore", "RunInfo", "StoredRun", "StoredCalibration", "store_path", "now_iso",
           "pid_alive"]

SCHEMA_VERSION = 1
BUSY_TIMEOUT_MS = 120_000
HOME_ENV = "WILLITSCALE_HOME"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    options TEXT NOT NULL,
    environment TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rows (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    UNIQUE (run_id, seq)
);
CREATE TABLE IF NOT EXISTS calibrations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    path TEXT NOT NULL,
    runs TEXT NOT NULL,
    toml TEXT NOT NULL
);
"""

STATUSES = ("running", "complete", "interrupted", "failed", "killed")


def pid_alive(pid: int) -> bool:
    """Whether process ``pid`` exists on this host (ours or another user's)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it exists, owned by someone else
        return True
    return True


def now_iso() -> str:
    """The current UTC time, ISO 8601 to the second."""
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def home() -> Path:
    """willitscale's data folder: ``$WILLITSCALE_HOME`` or the platform's user data folder."""
    env = os.environ.get(HOME_ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("willitscale"))


def store_path() -> Path:
    return home() / "results.sqlite"


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

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "started_at": self.started_at,
                "finished_at": self.finished_at, "status": self.status, "label": self.label,
                "rows": self.rows, "host": self.host, "options": dict(self.options),
                "environment": _plain(self.environment)}


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRun:
    """A run and its rows (as stored JSON objects, in measurement order)."""

    info: RunInfo
    rows: tuple[Mapping[str, Any], ...] = field(default_factory=tuple)

    def to_json(self) -> dict[str, Any]:
        return {**self.info.to_json(), "results": [dict(r) for r in self.rows]}


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredCalibration:
    id: int
    created_at: str
    path: str
    runs: tuple[int, ...]
    toml: str


def _plain(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        return {k: _plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


def _frozen(obj: Any) -> Any:
    if isinstance(obj, dict):
        return MappingProxyType({k: _frozen(v) for k, v in obj.items()})
    if isinstance(obj, list):
        return tuple(_frozen(v) for v in obj)
    return obj


#: filesystem types whose files other hosts may open at the same time (``/proc/mounts`` names)
NETWORK_FILESYSTEMS = frozenset({"nfs", "nfs4", "cifs", "smb3", "smbfs", "lustre", "gpfs",
                                 "beegfs", "ceph", "glusterfs", "fuse.glusterfs", "fuse.sshfs",
                                 "9p", "afs", "panfs", "fuse.ceph", "wekafs"})


def filesystem_type(path: Path, mounts: str) -> str:
    """The type of the filesystem holding ``path``: the longest mount point above it in
    ``mounts`` (the text of ``/proc/mounts``); ``""`` when none matches."""
    best, kind = -1, ""
    resolved = str(path.resolve())
    for line in mounts.splitlines():
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = resolved == point or resolved.startswith(point.rstrip("/") + "/")
        if inside and len(point) > best:
            best, kind = len(point), fields[2]
    return kind


def journal_mode_for(fstype: str) -> str:
    """SQLite's WAL keeps its index in shared memory, which only works when every process using
    the database is on one host (sqlite.org/wal.html, "WAL does not work over a network
    filesystem"); on a network filesystem (a Slurm cluster's shared home) the rollback journal,
    which relies on file locks, is the mode SQLite supports."""
    return "DELETE" if fstype in NETWORK_FILESYSTEMS else "WAL"


def _local_mounts() -> str:
    try:
        return Path("/proc/mounts").read_text()
    except OSError:  # not Linux: no way to tell, keep WAL
        return ""


@functools.cache  # once per store and process
def _note_rollback_journal(path: Path, fstype: str) -> None:
    print(f"note: results store {path} is on a network filesystem ({fstype}): using SQLite's "
          "rollback journal, not WAL", file=sys.stderr)


class Store:
    """The SQLite results store. Use as a context manager, or call :meth:`close`."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else store_path()
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fstype = filesystem_type(self.path.parent, _local_mounts())
        self.journal_mode = journal_mode_for(fstype)
        if self.journal_mode != "WAL":
            _note_rollback_journal(self.path, fstype)
        # opening can meet a lock SQLite does not wait on (switching a new file to WAL while
        # another process creates it; recovering the WAL index after a writer was killed):
        # retry it like any other busy wait
        deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
        while True:
            db = None
            try:
                db = self._db = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT_MS / 1000,
                                                isolation_level=None)
                self._open()
                return
            except sqlite3.OperationalError as exc:
                if db is not None:
                    db.close()
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise ConfigError(f"results store {self.path}: {exc}") from None
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                raise ConfigError(f"results store {self.path}: {exc}") from None

    def _open(self) -> None:
        """Journal mode and schema: idempotent, so a second opener changes nothing."""
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._db.execute(f"PRAGMA journal_mode = {self.journal_mode}")
        self._db.execute("PRAGMA synchronous = NORMAL")
        with self._write():
            for statement in _SCHEMA.split(";"):
                if statement.strip():
                    self._db.execute(statement)
            self._db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)",
                             (str(SCHEMA_VERSION),))

    # -- lifecycle -----------------------------------------------------------------------

    def close(self) -> None:
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @contextmanager
    def _write(self) -> Iterator[None]:
        """One write transaction, taking the write lock up front (no upgrade deadlocks)."""
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    # -- writing -------------------------------------------------------------------------

    def start_run(self, kind: str, *, options: Mapping[str, Any], environment: Mapping[str, Any],
                  label: str = "") -> int:
        """Record a new run as ``running``; returns its id."""
        with self._write():
            cur = self._db.execute(
                "INSERT INTO runs (kind, started_at, status, label, options, environment, host, pid)"
                " VALUES (?, ?, 'running', ?, ?, ?, ?, ?)",
                (kind, now_iso(), label, json.dumps(_plain(options), allow_nan=False),
                 json.dumps(_plain(environment), allow_nan=False), socket.gethostname(), os.getpid()),
            )
            return int(cur.lastrowid)

    def add_row(self, run_id: int, seq: int, data: Mapping[str, Any]) -> None:
        """Commit one measured row now (so an interruption cannot lose it)."""
        text = json.dumps(_plain(data), allow_nan=False)
        with self._write():
            self._db.execute("INSERT INTO rows (run_id, seq, data) VALUES (?, ?, ?)",
                             (run_id, seq, text))

    def finish_run(self, run_id: int, status: str) -> None:
        if status not in STATUSES:
            raise ConfigError("status", status, "one of " + ", ".join(STATUSES))
        with self._write():
            self._db.execute("UPDATE runs SET status = ?, finished_at = ? WHERE id = ?",
                             (status, now_iso(), run_id))

    def add_calibration(self, *, path: str, runs: tuple[int, ...], toml: str) -> int:
        with self._write():
            cur = self._db.execute(
                "INSERT INTO calibrations (created_at, path, runs, toml) VALUES (?, ?, ?, ?)",
                (now_iso(), path, json.dumps(list(runs)), toml))
            return int(cur.lastrowid)

    def import_runs(self, source: Store) -> list[tuple[int, int | None, str]]:
        """Copy ``source``'s finished runs, rows and all, into this store (new ids, same times,
        hosts and statuses). Returns ``(source id, new id or None, why skipped)`` per run, oldest
        first. A run already here (same kind, host, pid, start time, label and row count) is skipped,
        so importing twice is harmless; so is a run still ``running`` (it may not be finished)."""
        if source.path.resolve() == self.path.resolve():
            raise ConfigError("store", str(source.path), "another results store than this one")
        present = {(i.kind, i.host, i.pid, i.started_at, i.label, i.rows) for i in self.runs()}
        out: list[tuple[int, int | None, str]] = []
        for info in reversed(source.runs()):
            key = (info.kind, info.host, info.pid, info.started_at, info.label, info.rows)
            if key in present:
                out.append((info.id, None, "already here"))
                continue
            if info.status == "running":
                out.append((info.id, None, "still running (import it again when it finishes)"))
                continue
            run = source.run(info.id)
            with self._write():
                cur = self._db.execute(
                    "INSERT INTO runs (kind, started_at, finished_at, status, label, options,"
                    " environment, host, pid) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (info.kind, info.started_at, info.finished_at, info.status, info.label,
                     json.dumps(_plain(info.options), allow_nan=False),
                     json.dumps(_plain(info.environment), allow_nan=False), info.host, info.pid))
                new_id = int(cur.lastrowid)
                self._db.executemany(
                    "INSERT INTO rows (run_id, seq, data) VALUES (?, ?, ?)",
                    [(new_id, seq, json.dumps(_plain(row), allow_nan=False))
                     for seq, row in enumerate(run.rows)])
            present.add(key)
            out.append((info.id, new_id, ""))
        return out

    # -- reading -------------------------------------------------------------------------

    def _info(self, row: tuple) -> RunInfo:
        rid, kind, started, finished, status, label, options, env, host, pid, nrows = row
        if status == "running" and host == socket.gethostname() and not pid_alive(pid):
            status = "killed"
        return RunInfo(id=rid, kind=kind, started_at=started, finished_at=finished, status=status,
                       label=label, options=_frozen(json.loads(options)),
                       environment=_frozen(json.loads(env)), host=host, pid=pid, rows=nrows)

    _RUN_COLUMNS = ("r.id, r.kind, r.started_at, r.finished_at, r.status, r.label, r.options, "
                    "r.environment, r.host, r.pid, (SELECT COUNT(*) FROM rows w WHERE w.run_id = r.id)")

    def runs(self, *, kind: str | None = None, limit: int | None = None) -> list[RunInfo]:
        """Runs, newest first."""
        sql = f"SELECT {self._RUN_COLUMNS} FROM runs r"
        params: list[Any] = []
        if kind:
            sql += " WHERE r.kind = ?"
            params.append(kind)
        sql += " ORDER BY r.id DESC"
        if limit is not None:
            sql += " LIMIT ?"
            params.append(int(limit))
        return [self._info(row) for row in self._db.execute(sql, params)]

    def run_info(self, run_id: int) -> RunInfo:
        row = self._db.execute(f"SELECT {self._RUN_COLUMNS} FROM runs r WHERE r.id = ?",
                               (int(run_id),)).fetchone()
        if row is None:
            latest = self._db.execute("SELECT MAX(id) FROM runs").fetchone()[0]
            known = f"runs are numbered 1 to {latest}" if latest else "the store has no runs yet"
            raise ConfigError("run", run_id, f"a stored run id ({known}; see `willitscale results list`)")
        return self._info(row)

    def run(self, run_id: int) -> StoredRun:
        info = self.run_info(run_id)
        rows = tuple(_frozen(json.loads(text)) for (text,) in self._db.execute(
            "SELECT data FROM rows WHERE run_id = ? ORDER BY seq", (info.id,)))
        return StoredRun(info=info, rows=rows)

    def latest_run_id(self, *, kind: str | None = None) -> int:
        runs = self.runs(kind=kind, limit=1)
        if not runs:
            what = f"{kind} runs" if kind else "runs"
            raise ConfigError(f"the results store ({self.path}) has no {what} yet: "
                              "run `willitscale bench ...` first")
        return runs[0].id

    def calibrations(self) -> list[StoredCalibration]:
        return [StoredCalibration(id=i, created_at=c, path=p, runs=tuple(json.loads(r)), toml=t)
                for i, c, p, r, t in self._db.execute(
                    "SELECT id, created_at, path, runs, toml FROM calibrations ORDER BY id DESC")]

    def integrity_ok(self) -> bool:
        return self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


#: The public name (``willitscale.ResultsStore``).
ResultsStore = Store
