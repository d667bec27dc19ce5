"""Getting back what a damaged results store still holds (``willitscale results salvage``).

A damaged page makes SQLite fail every query that walks through it; the rest of the file is
usually fine. So each table is first read whole and, when that fails, row by row by its id
(``SELECT ... WHERE id = ?`` walks only the path to that row), up to the largest id SQLite
handed out (``sqlite_sequence``; the tables use AUTOINCREMENT). Every run that can be read is
copied with the rows that can be read; a run that lost rows says so in its ``reason``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from willitscale.errors import StoreError
from willitscale.results.stored import STATUSES, RunInfo, StoredRun, frozen

__all__ = ["Salvaged", "salvage"]

_RUN_COLUMNS = ("id", "kind", "started_at", "finished_at", "status", "label", "options",
                "environment", "host", "pid")


@dataclass(frozen=True, slots=True, kw_only=True)
class Salvaged:
    """What a salvage found: readable runs (rows and all), what was lost."""

    runs: tuple[StoredRun, ...]
    lost_runs: int  #: run ids up to the largest handed out that could not be read
    lost_rows: int  #: rows that could not be read (or belong to a lost run)
    calibrations: tuple[tuple[str, str, tuple[int, ...], str], ...]  #: created, path, runs, toml


def _largest_id(db: sqlite3.Connection, table: str) -> int:
    """The largest id handed out in ``table`` (AUTOINCREMENT's record, else the largest left)."""
    for sql, args in (("SELECT seq FROM sqlite_sequence WHERE name = ?", (table,)),
                      (f"SELECT MAX(id) FROM {table}", ())):
        try:
            row = db.execute(sql, args).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row and row[0] is not None:
            return int(row[0])
    return 0


def _readable(db: sqlite3.Connection, table: str, columns: str) -> Iterator[tuple]:
    """Every readable record of ``table``: all at once, else one id at a time."""
    try:
        yield from db.execute(f"SELECT {columns} FROM {table} ORDER BY id").fetchall()
        return
    except sqlite3.DatabaseError:
        pass
    for i in range(1, _largest_id(db, table) + 1):
        try:
            row = db.execute(f"SELECT {columns} FROM {table} WHERE id = ?", (i,)).fetchone()
        except sqlite3.DatabaseError:
            continue
        if row is not None:
            yield row


def _has_reason(db: sqlite3.Connection) -> bool:
    try:
        return any(col[1] == "reason" for col in db.execute("PRAGMA table_info(runs)"))
    except sqlite3.DatabaseError:
        return False


def _parsed(parse: Callable[[], Any]) -> Any:
    try:
        return parse()
    except (ValueError, TypeError):
        return None


def _runs(db: sqlite3.Connection) -> tuple[dict[int, dict], int]:
    columns = ", ".join(_RUN_COLUMNS) + (", reason" if _has_reason(db) else ", ''")
    runs: dict[int, dict] = {}
    for rid, kind, started, finished, status, label, options, env, host, pid, reason in \
            _readable(db, "runs", columns):
        options, env = _parsed(lambda: json.loads(options)), _parsed(lambda: json.loads(env))
        if not isinstance(options, dict) or not isinstance(env, dict) or status not in STATUSES:
            continue
        runs[rid] = {"id": rid, "kind": kind, "started_at": started, "finished_at": finished,
                     # nobody writes to a damaged store any more: a "running" run was cut short
                     "status": "killed" if status == "running" else status, "label": label,
                     "options": frozen(options), "environment": frozen(env), "host": host,
                     "pid": pid, "reason": reason or ""}
    return runs, max(_largest_id(db, "runs"), max(runs, default=0)) - len(runs)


def _rows(db: sqlite3.Connection) -> tuple[dict[int, list[tuple[int, Any]]], int]:
    rows: dict[int, list[tuple[int, Any]]] = {}
    read = 0
    for run_id, seq, data in _readable(db, "rows", "run_id, seq, data"):
        row = _parsed(lambda: json.loads(data))
        if isinstance(row, dict):
            rows.setdefault(run_id, []).append((seq, frozen(row)))
            read += 1
    return rows, max(_largest_id(db, "rows") - read, 0)


def _calibrations(db: sqlite3.Connection) -> tuple[tuple[str, str, tuple[int, ...], str], ...]:
    out = []
    for created, path, runs, toml in _readable(db, "calibrations", "created_at, path, runs, toml"):
        ids = _parsed(lambda: json.loads(runs))
        if isinstance(ids, list):
            out.append((created, path, tuple(int(i) for i in ids), toml))
    return tuple(out)


def salvage(path: Path) -> Salvaged:
    """Read every run, row and calibration of the store file at ``path`` that can be read."""
    try:
        db = sqlite3.connect(path, isolation_level=None)
    except sqlite3.Error as exc:
        raise StoreError(f"cannot open {path} to salvage it ({exc})") from None
    try:
        try:
            db.execute("SELECT 1 FROM sqlite_master LIMIT 1").fetchall()
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path} cannot be read as an SQLite database at all ({exc}); "
                             f"try `sqlite3 {path} .recover | sqlite3 recovered.sqlite`") from None
        runs, lost_runs = _runs(db)
        rows, lost_rows = _rows(db)
        calibrations = _calibrations(db)
    finally:
        db.close()
    out = []
    for rid, run in sorted(runs.items()):
        kept = tuple(row for _, row in sorted(rows.get(rid, []), key=lambda r: r[0]))
        if run["status"] == "killed" and not run["reason"]:
            run["reason"] = "still marked running in the damaged store it was salvaged from"
        out.append(StoredRun(info=RunInfo(**run, rows=len(kept)), rows=kept))
    orphans = sum(len(r) for rid, r in rows.items() if rid not in runs)
    return Salvaged(runs=tuple(out), lost_runs=lost_runs, lost_rows=lost_rows + orphans,
                    calibrations=calibrations)
