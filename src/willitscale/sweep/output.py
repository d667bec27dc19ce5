"""Where a sweep's rows go: a CSV file written row by row, or a Parquet file, and which points a
file already holds (so a rerun skips them).

A CSV row is written and flushed as soon as its point finishes, so an interrupted sweep keeps
every finished point; a line cut short by a kill is dropped when the file is opened again. A
Parquet file cannot grow row by row: its rows go to a journal beside it (``FILE.parquet.rows.jsonl``,
one JSON object per line, flushed per row) and the Parquet file is written from the old file
and the journal when the sweep stops, finished or interrupted; the journal is then removed.
When every point of the grid is done, the file is rewritten in grid order, so the same grid
gives the same file whatever the order in which workers finished.
"""

from __future__ import annotations

import csv
import json
import math
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from willitscale.errors import ConfigError, MissingDependency

__all__ = ["RowFile", "open_rows", "KEY_COLUMN"]

#: the column that names a row's point (:attr:`willitscale.sweep.grid.Point.key`)
KEY_COLUMN = "point"


def _cell(value: Any) -> str:
    """A CSV cell: floats exactly (``repr``), lists as JSON, None as empty."""
    if value is None:
        return ""
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, list | tuple | dict):
        return json.dumps(value)
    return str(value)


class RowFile:
    """Rows of one sweep in a CSV file; ``finished`` holds the keys of the rows already there."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path, self.columns = Path(path), tuple(columns)
        self.finished: set[str] = set()
        self._file = None
        self._writer = None
        if self.path.exists():
            self._read_existing()

    def _read_existing(self) -> None:
        _drop_partial_line(self.path)
        with self.path.open(newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if header is None:
                return
            if tuple(header) != self.columns:
                raise ConfigError("--out", str(self.path), "a new file, or one written by this grid (it holds "
                                  f"other columns: {', '.join(header[:8])}{', ...' if len(header) > 8 else ''})")
            at = header.index(KEY_COLUMN)
            self.finished = {row[at] for row in reader if len(row) == len(header)}

    def add(self, row: Mapping[str, Any]) -> None:
        """Append one row and flush it to the file."""
        if self._file is None:
            new = not self.path.exists() or self.path.stat().st_size == 0
            self._file = self.path.open("a", newline="")
            self._writer = csv.writer(self._file, lineterminator="\n")
            if new:
                self._writer.writerow(self.columns)
        self._writer.writerow([_cell(row.get(c)) for c in self.columns])
        self._file.flush()
        self.finished.add(str(row[KEY_COLUMN]))

    def close(self, order: Sequence[str] | None = None) -> None:
        """Close the file; with ``order`` (every point's key, grid order) rewrite it in that order."""
        if self._file is not None:
            self._file.close()
            self._file = None
        if order is not None and self.path.exists():
            _rewrite_csv(self.path, order)


def _drop_partial_line(path: Path) -> None:
    """Cut a last line that a kill left without its newline."""
    with path.open("rb+") as f:
        data = f.read()
        if data and not data.endswith(b"\n"):
            f.truncate(data.rfind(b"\n") + 1)


def _rewrite_csv(path: Path, order: Sequence[str]) -> None:
    with path.open(newline="") as f:
        rows = list(csv.reader(f))
    header, body = rows[0], rows[1:]
    at = header.index(KEY_COLUMN)
    rank = {key: i for i, key in enumerate(order)}
    body.sort(key=lambda r: rank.get(r[at], len(rank)))
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", newline="") as f:
        csv.writer(f, lineterminator="\n").writerows([header, *body])
    os.replace(tmp, path)


class ParquetRows:
    """Rows of one sweep bound for a Parquet file, journaled row by row beside it."""

    def __init__(self, path: Path, columns: Sequence[str]):
        self.path, self.columns = Path(path), tuple(columns)
        self.journal = self.path.with_name(self.path.name + ".rows.jsonl")
        self._pa, self._pq = _pyarrow()
        self._old: list[dict] = []
        if self.path.exists():
            table = self._pq.read_table(self.path)
            if tuple(table.column_names) != self.columns:
                raise ConfigError("--out", str(self.path), "a new file, or one written by this grid (it holds "
                                  f"other columns: {', '.join(table.column_names[:8])})")
            self._old = table.to_pylist()
        self._new = _read_journal(self.journal) if self.journal.exists() else []
        self.finished = {str(r[KEY_COLUMN]) for r in self._old + self._new}
        self._file = None

    def add(self, row: Mapping[str, Any]) -> None:
        if self._file is None:  # __init__ read the journal, dropping a line cut short
            self._file = self.journal.open("a")
        row = {c: _plain(row.get(c)) for c in self.columns}
        self._file.write(json.dumps(row) + "\n")
        self._file.flush()
        self._new.append(row)
        self.finished.add(str(row[KEY_COLUMN]))

    def close(self, order: Sequence[str] | None = None) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
        rows = self._old + self._new
        if order is not None:
            rank = {key: i for i, key in enumerate(order)}
            rows.sort(key=lambda r: rank.get(str(r[KEY_COLUMN]), len(rank)))
        if rows and (self._new or order is not None):
            table = self._pa.Table.from_pydict({c: _column([r.get(c) for r in rows]) for c in self.columns})
            tmp = self.path.with_name(self.path.name + ".tmp")
            self._pq.write_table(table, tmp)
            os.replace(tmp, self.path)
        if self.journal.exists():
            self.journal.unlink()


def _plain(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return repr(value)
    return list(value) if isinstance(value, tuple) else value


def _column(values: list) -> list:
    """One Parquet column's values: numbers stay numbers unless the column mixes in text or lists."""
    kinds = {type(v) for v in values if v is not None}
    if kinds <= {int, float} or kinds == {bool} or kinds == {str}:
        return [float(v) if kinds == {int, float} and v is not None else v for v in values]
    return [None if v is None else _cell(v) for v in values]


def _read_journal(path: Path) -> list[dict]:
    _drop_partial_line(path)
    with path.open() as f:
        return [json.loads(line) for line in f if line.strip()]


def _pyarrow():
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        raise MissingDependency("pyarrow", "parquet", "Writing Parquet (--out FILE.parquet)") from None
    return pa, pq


def open_rows(path: str | Path, columns: Iterable[str]):
    """The row file for ``path``: Parquet for ``.parquet``, CSV for ``.csv``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".parquet"):
        raise ConfigError("--out", str(path), "a file name ending in .csv or .parquet")
    if path.is_dir():
        raise ConfigError("--out", str(path), "a file, not a directory")
    return (ParquetRows if suffix == ".parquet" else RowFile)(path, tuple(columns))
