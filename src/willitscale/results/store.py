"""The local results store: every benchmark run and each of its rows, in SQLite.

Where: ``$WILLITSCALE_HOME/results.sqlite`` when ``WILLITSCALE_HOME`` is set, else the platform's
user data folder (``platformdirs.user_data_dir("willitscale")``). The folder and file are made
private to the user (0700, 0600), whatever the umask.

Durability: the database is in WAL mode (rollback-journal mode on a network filesystem, where
WAL's shared-memory index cannot be shared between hosts; see :func:`journal_mode_for`) and
every row is committed on its own, as soon as it is measured, so an interrupted sweep (Ctrl-C,
a crash, SIGKILL) keeps every finished row, and several benchmarks writing at once wait for
each other (``busy_timeout``) instead of failing or losing rows. A run records the host and pid
that wrote it: a run still marked ``running`` whose writer is gone is reported as ``killed``.

Versions: the schema is versioned (:mod:`willitscale.results.schema`); opening a store migrates
an older one and refuses a newer one. Damage: a small store is checked (``PRAGMA quick_check``)
when opened, and every SQLite error is turned into a :class:`StoreError` that says what is
wrong and how to get back what is readable (:mod:`willitscale.results.store_faults`).
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
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from willitscale.errors import ConfigError, StoreError
from willitscale.results.home import store_path
from willitscale.results.schema import (
    SCHEMA_VERSION,
    NewerStoreError,
    create_or_upgrade,
    stored_version,
)
from willitscale.results.store_faults import (
    create_private,
    damaged,
    newer_store,
    store_error,
)
from willitscale.results.stored import (
    STATUSES,
    RunInfo,
    StoredCalibration,
    StoredRun,
    frozen,
    plain,
)

__all__ = ["pid_alive", "Store", "ResultsStore", "RunInfo", "StoredRun", "StoredCalibration", "store_path",
           "now_iso", "STATUSES", "SCHEMA_VERSION"]

BUSY_TIMEOUT_MS = 120_000
#: ``PRAGMA quick_check`` on open up to this size: it reads every page, ~1.3 ms per MB measured
#: here (a 97 MB store of 400k rows: 0.13 s, warm cache); larger stores are checked when read
QUICK_CHECK_MAX_BYTES = 64 * 2**20


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


@functools.cache  # once per store and process
def _note_migrated(path: Path, versions: tuple[int, int], adds: tuple[str, ...]) -> None:
    print(f"note: results store {path} migrated from schema version {versions[0]} to "
          f"{versions[1]} (adds {'; '.join(adds)})", file=sys.stderr)


class Store:
    """The SQLite results store. Use as a context manager, or call :meth:`close`.

    Every method raises :class:`StoreError` (never a bare ``sqlite3`` exception) when the file
    is damaged, from a newer release, locked too long, read-only or on a full disk."""

    def __init__(self, path: str | Path | None = None):
        self.path = Path(path) if path is not None else store_path()
        create_private(self.path)
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
                    raise store_error(self.path, exc, "opening it") from None
                time.sleep(0.05)
            except sqlite3.DatabaseError as exc:
                if db is not None:
                    db.close()
                raise store_error(self.path, exc, "opening it") from None
            except StoreError:
                if db is not None:
                    db.close()
                raise

    def _open(self) -> None:
        """Check, then journal mode and schema: idempotent, so a second opener changes nothing."""
        self._db.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        self._check_pages()
        version = stored_version(self._db)
        if version is not None and version > SCHEMA_VERSION:
            raise newer_store(self.path, version, SCHEMA_VERSION)
        self._db.execute(f"PRAGMA journal_mode = {self.journal_mode}")
        self._db.execute("PRAGMA synchronous = NORMAL")
        try:
            with self._write():
                applied = create_or_upgrade(self._db)
        except NewerStoreError as exc:  # made newer by another process meanwhile
            raise newer_store(self.path, exc.version, SCHEMA_VERSION) from None
        if applied:
            _note_migrated(self.path, (applied[0].to - 1, SCHEMA_VERSION),
                           tuple(m.adds for m in applied))

    def _check_pages(self) -> None:
        """``PRAGMA quick_check`` when the file is small enough for it to be cheap."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return
        if size > QUICK_CHECK_MAX_BYTES:
            return
        problems = [line for (line,) in self._db.execute("PRAGMA quick_check(5)")]
        if problems != ["ok"]:
            raise damaged(self.path, "PRAGMA quick_check: " + "; ".join(problems))

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
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")

    @contextmanager
    def _guard(self, doing: str) -> Iterator[None]:
        """SQLite's errors, and stored text that no longer parses, as :class:`StoreError`."""
        try:
            yield
        except sqlite3.Error as exc:
            raise store_error(self.path, exc, doing) from None
        except (ValueError, TypeError) as exc:  # JSON text cut or garbled by damage
            raise damaged(self.path, f"{doing}: stored text does not parse ({exc})") from None

    # -- writing -------------------------------------------------------------------------

    def start_run(self, kind: str, *, options: Mapping[str, Any], environment: Mapping[str, Any],
                  label: str = "") -> int:
        """Record a new run as ``running``; returns its id."""
        return self.add_run(kind=kind, started_at=now_iso(), finished_at=None, status="running",
                            label=label, options=options, environment=environment,
                            host=socket.gethostname(), pid=os.getpid())

    def add_row(self, run_id: int, seq: int, data: Mapping[str, Any]) -> None:
        """Commit one measured row now (so an interruption cannot lose it)."""
        text = json.dumps(plain(data), allow_nan=False)
        with self._guard(f"storing row {seq} of run {run_id}"), self._write():
            self._db.execute("INSERT INTO rows (run_id, seq, data) VALUES (?, ?, ?)",
                             (run_id, seq, text))

    def finish_run(self, run_id: int, status: str, reason: str = "") -> None:
        """Mark the run ``status``; ``reason`` says why it failed or stopped (kept if empty)."""
        if status not in STATUSES:
            raise ConfigError("status", status, "one of " + ", ".join(STATUSES))
        with self._guard(f"finishing run {run_id}"), self._write():
            self._db.execute("UPDATE runs SET status = ?, finished_at = ?, "
                             "reason = CASE WHEN ? = '' THEN reason ELSE ? END WHERE id = ?",
                             (status, now_iso(), reason, reason, run_id))

    def add_run(self, *, kind: str, started_at: str, finished_at: str | None, status: str,
                label: str, options: Mapping[str, Any], environment: Mapping[str, Any],
                host: str, pid: int, reason: str = "",
                rows: list[tuple[int, Mapping[str, Any]]] | None = None) -> int:
        """Insert one run, and its ``(seq, row)`` pairs, in one transaction; returns its id."""
        if status not in STATUSES:
            raise ConfigError("status", status, "one of " + ", ".join(STATUSES))
        with self._guard(f"storing a {kind} run"), self._write():
            cur = self._db.execute(
                "INSERT INTO runs (kind, started_at, finished_at, status, label, options,"
                " environment, host, pid, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (kind, started_at, finished_at, status, label,
                 json.dumps(plain(options), allow_nan=False),
                 json.dumps(plain(environment), allow_nan=False), host, int(pid), reason))
            new_id = int(cur.lastrowid)
            self._db.executemany(
                "INSERT INTO rows (run_id, seq, data) VALUES (?, ?, ?)",
                [(new_id, seq, json.dumps(plain(row), allow_nan=False)) for seq, row in rows or ()])
        return new_id

    def add_calibration(self, *, path: str, runs: tuple[int, ...], toml: str,
                        created_at: str | None = None) -> int:
        with self._guard("storing a calibration"), self._write():
            cur = self._db.execute(
                "INSERT INTO calibrations (created_at, path, runs, toml) VALUES (?, ?, ?, ?)",
                (created_at or now_iso(), path, json.dumps(list(runs)), toml))
            return int(cur.lastrowid)

    def import_runs(self, source: Store) -> list[tuple[int, int | None, str]]:
        """Copy ``source``'s finished runs, rows and all, into this store (new ids, same times,
        hosts and statuses). Returns ``(source id, new id or None, why skipped)`` per run, oldest
        first. A run already here (same kind, host, pid, start time, label and row count) is skipped,
        so importing twice is harmless; so is a run still ``running`` (it may not be finished)."""
        if source.path.resolve() == self.path.resolve():
            raise ConfigError("store", str(source.path), "another results store than this one")
        return self.import_stored([source.run(info.id) for info in reversed(source.runs())
                                   if info.status != "running"],
                                  still_running=[i.id for i in reversed(source.runs())
                                                 if i.status == "running"])

    def import_stored(self, runs: list[StoredRun], still_running: list[int] = ()
                      ) -> list[tuple[int, int | None, str]]:
        """Add ``runs`` (from another store or an export) unless already here; see
        :meth:`import_runs`. ``still_running``: ids reported as skipped for that reason."""
        present = {_identity(i) for i in self.runs()}
        out: list[tuple[int, int | None, str]] = [
            (i, None, "still running (import it again when it finishes)") for i in still_running]
        for run in runs:
            info = run.info
            key = _identity(info)
            if key in present:
                out.append((info.id, None, "already here"))
                continue
            new_id = self.add_run(kind=info.kind, started_at=info.started_at,
                                  finished_at=info.finished_at, status=info.status,
                                  label=info.label, options=info.options,
                                  environment=info.environment, host=info.host, pid=info.pid,
                                  reason=info.reason, rows=list(enumerate(run.rows)))
            present.add(key)
            out.append((info.id, new_id, ""))
        return sorted(out, key=lambda r: r[0])

    # -- reading -------------------------------------------------------------------------

    def _info(self, row: tuple) -> RunInfo:
        rid, kind, started, finished, status, label, options, env, host, pid, reason, nrows = row
        if status == "running" and host == socket.gethostname() and not pid_alive(pid):
            status = "killed"
        return RunInfo(id=rid, kind=kind, started_at=started, finished_at=finished, status=status,
                       label=label, options=frozen(json.loads(options)),
                       environment=frozen(json.loads(env)), host=host, pid=pid, rows=nrows,
                       reason=reason)

    _RUN_COLUMNS = ("r.id, r.kind, r.started_at, r.finished_at, r.status, r.label, r.options, "
                    "r.environment, r.host, r.pid, r.reason, "
                    "(SELECT COUNT(*) FROM rows w WHERE w.run_id = r.id)")

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
        with self._guard("reading the runs"):
            return [self._info(row) for row in self._db.execute(sql, params).fetchall()]

    def run_info(self, run_id: int) -> RunInfo:
        with self._guard(f"reading run {run_id}"):
            row = self._db.execute(f"SELECT {self._RUN_COLUMNS} FROM runs r WHERE r.id = ?",
                                   (int(run_id),)).fetchone()
            if row is not None:
                return self._info(row)
            latest = self._db.execute("SELECT MAX(id) FROM runs").fetchone()[0]
        known = f"runs are numbered 1 to {latest}" if latest else "the store has no runs yet"
        raise ConfigError("run", run_id, f"a stored run id ({known}; see `willitscale results list`)")

    def run(self, run_id: int) -> StoredRun:
        info = self.run_info(run_id)
        with self._guard(f"reading the rows of run {info.id}"):
            rows = tuple(frozen(json.loads(text)) for (text,) in self._db.execute(
                "SELECT data FROM rows WHERE run_id = ? ORDER BY seq", (info.id,)).fetchall())
        return StoredRun(info=info, rows=rows)

    def latest_run_id(self, *, kind: str | None = None) -> int:
        runs = self.runs(kind=kind, limit=1)
        if not runs:
            what = f"{kind} runs" if kind else "runs"
            # the environment, not the command line: exit 1
            raise StoreError(f"the results store ({self.path}) has no {what} yet: "
                             "run `willitscale bench ...` first")
        return runs[0].id

    def calibrations(self) -> list[StoredCalibration]:
        with self._guard("reading the calibrations"):
            return [StoredCalibration(id=i, created_at=c, path=p, runs=tuple(json.loads(r)), toml=t)
                    for i, c, p, r, t in self._db.execute(
                        "SELECT id, created_at, path, runs, toml FROM calibrations ORDER BY id DESC"
                    ).fetchall()]

    def integrity_ok(self) -> bool:
        with self._guard("checking it"):
            return self._db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def _identity(info: RunInfo) -> tuple:
    """What makes two stored runs the same measurement (for imports: never twice)."""
    return (info.kind, info.host, info.pid, info.started_at, info.label, info.rows)


#: The public name (``willitscale.ResultsStore``).
ResultsStore = Store
