"""``results export`` files, and reading them back (``results import runs.csv``).

One record per measured row: ``run_id, kind, started_at, label``, the row's own fields (the
names :mod:`willitscale.results.records` writes: ``size_bytes``, ``busbw_GBps``, ...), then what
it takes to rebuild the run elsewhere: ``run_status, run_finished_at, run_host, run_pid,
run_reason`` on every record, and ``run_options``, ``run_environment`` on the first record of
each run only (an environment is a few kB per host: repeated on every row it would make a
1000-row sweep of a large cluster a file of hundreds of MB). In CSV, those two are JSON text.
Runs without rows are not exported (there is nothing in them to compare).

Reading an export back checks every record on its own: a bad one (a field missing or not a
number, a kind or status that does not exist, a run whose records disagree) is reported with
its file and line and left out; the others are imported. CSV cannot tell a missing value from
``null``: an empty cell reads as absent.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from willitscale.errors import ConfigError
from willitscale.results.records import ROW_TYPES, row_from_json
from willitscale.results.stored import STATUSES, RunInfo, StoredRun, frozen, plain

__all__ = ["export_records", "csv_text", "json_text", "Problem", "ExportedRuns", "read_export",
           "RUN_FIELDS"]

#: the run's fields in every record (the first four as exports before them had them)
HEAD = ("run_id", "kind", "started_at", "label")
TAIL = ("run_status", "run_finished_at", "run_host", "run_pid", "run_reason")
#: on the first record of each run only
FIRST = ("run_options", "run_environment")
RUN_FIELDS = frozenset(HEAD + TAIL + FIRST)


def export_records(runs: Sequence[StoredRun]) -> list[dict[str, Any]]:
    """The export's records, runs in the order given, rows in measurement order."""
    records = []
    for run in runs:
        info = run.info
        for i, row in enumerate(run.rows):
            records.append({
                "run_id": info.id, "kind": info.kind, "started_at": info.started_at,
                "label": info.label, **plain(row), "run_status": info.status,
                "run_finished_at": info.finished_at, "run_host": info.host, "run_pid": info.pid,
                "run_reason": info.reason,
                "run_options": plain(info.options) if i == 0 else None,
                "run_environment": plain(info.environment) if i == 0 else None})
    return records


def json_text(records: list[dict[str, Any]]) -> str:
    return json.dumps(records, indent=2, allow_nan=False) + "\n"


def csv_text(records: list[dict[str, Any]]) -> str:
    """CSV with every record's fields as columns (run fields first and last, rows between);
    ``run_options``/``run_environment`` as JSON text, ``None`` as an empty cell."""
    middle: list[str] = []
    for rec in records:
        middle += [k for k in rec if k not in RUN_FIELDS and k not in middle]
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=[*HEAD, *middle, *TAIL, *FIRST], lineterminator="\n")
    writer.writeheader()
    for rec in records:
        writer.writerow({k: json.dumps(v, allow_nan=False) if k in FIRST and v is not None else v
                         for k, v in rec.items()})
    return buf.getvalue()


# -- reading back --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Problem:
    """A record that was not imported, and why."""

    file: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.message}"


@dataclass(frozen=True, slots=True, kw_only=True)
class ExportedRuns:
    runs: tuple[StoredRun, ...]  #: finished runs with their good rows (ids as in the file)
    still_running: tuple[int, ...]  #: runs marked running (not imported: may be unfinished)
    problems: tuple[Problem, ...]


class _Bad(Exception):
    """One record's problem (becomes a :class:`Problem` with its file and line)."""


def read_export(path: Path) -> ExportedRuns:
    """The runs of an export file (``.csv``, or ``.json`` as ``results export`` writes them)."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError("STORE", str(path), f"a readable export file ({exc})") from None
    is_json = path.suffix.lower() == ".json"
    records, problems = (_json_records if is_json else _csv_records)(text, str(path))
    return _runs(records, problems, str(path), from_csv=not is_json)


def _csv_records(text: str, name: str) -> tuple[list[tuple[int, dict]], list[Problem]]:
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        header = []
    missing = [c for c in ("run_id", "kind", "started_at", *FIRST) if c not in header]
    if missing:
        why = ("written by a willitscale release before exports carried each run's options and "
               "environment: export it again with this release, or import the store file itself"
               if "run_id" in header and "run_environment" in missing else "not a results export")
        raise ConfigError("STORE", name, f"a results export ({name} has no "
                                         f"{', '.join(missing)} column: {why})")
    records, problems, end = [], [], reader.line_num
    while True:
        start = end + 1
        try:
            values = next(reader)
        except StopIteration:
            break
        except csv.Error as exc:
            problems.append(Problem(file=name, line=start, message=f"not valid CSV ({exc})"))
            end = reader.line_num
            continue
        end = reader.line_num
        if not values:
            continue
        if len(values) > len(header):
            problems.append(Problem(file=name, line=start, message=f"{len(values)} fields, but "
                                    f"the header has {len(header)}"))
            continue
        records.append((start, dict(zip(header, values))))
    return records, problems


def _json_records(text: str, name: str) -> tuple[list[tuple[int, dict]], list[Problem]]:
    """Each record of a JSON array with the line it starts on; a record that does not parse is
    reported and skipped (reading resumes at the next record of ``results export``'s layout)."""
    decoder = json.JSONDecoder()
    start = text.find("[")
    if start < 0 or text[:start].strip():
        raise ConfigError("STORE", name, "a results export (a JSON file holding a list of records)")
    records, problems, pos = [], [], start + 1
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] == "]":
            break
        line = text.count("\n", 0, pos) + 1
        try:
            record, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            problems.append(Problem(file=name, line=text.count("\n", 0, exc.pos) + 1,
                                    message=f"not valid JSON ({exc.msg})"))
            resume = text.find("\n  {", pos + 1)
            if resume < 0:
                break
            pos = resume
            continue
        if not isinstance(record, dict):
            problems.append(Problem(file=name, line=line, message="a record must be a JSON object"))
            continue
        records.append((line, record))
    return records, problems


def _cell(value: Any, reference: Any) -> Any:
    """A CSV cell as the type the row's field has (``reference``: its value in the canonical
    row), or its best reading when the field is not one this release knows."""
    if not isinstance(value, str):
        return value
    if isinstance(reference, bool) or reference is _UNKNOWN and value in ("True", "False"):
        if value not in ("True", "False"):
            raise _Bad(f"{value!r} is not True or False")
        return value == "True"
    if isinstance(reference, int):
        return int(value)
    if isinstance(reference, float):
        return float(value)
    if reference is _UNKNOWN:
        for kind in (int, float):
            try:
                return kind(value)
            except ValueError:
                pass
    return value


_UNKNOWN = object()


def _row(kind: str, record: Mapping[str, Any], from_csv: bool) -> dict[str, Any]:
    fields = {k: v for k, v in record.items() if k not in RUN_FIELDS}
    if from_csv:
        fields = {k: v for k, v in fields.items() if v not in ("", None)}
        loose = {k: (v == "True" if v in ("True", "False") else v) for k, v in fields.items()}
    else:
        loose = fields
    try:
        canonical = row_from_json(kind, loose).to_json()
    except ConfigError as exc:
        raise _Bad(str(exc).replace("a stored ", "a ")) from None
    if not from_csv:
        return fields
    try:
        return {k: _cell(v, canonical.get(k, _UNKNOWN)) for k, v in fields.items()}
    except ValueError as exc:
        raise _Bad(f"a {kind} row is malformed ({exc})") from None


def _json_field(value: Any, field: str, from_csv: bool) -> Any:
    if from_csv and isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise _Bad(f"{field} is not valid JSON ({exc.msg})") from None
    if not isinstance(value, dict):
        raise _Bad(f"{field} must be a JSON object")
    return value


def _run_of(record: Mapping[str, Any]) -> dict[str, Any]:
    """The run fields every record repeats, checked."""
    try:
        run_id = int(record.get("run_id"))
    except (TypeError, ValueError):
        raise _Bad(f"run_id = {record.get('run_id')!r} is not a run number") from None
    kind, status = record.get("kind"), record.get("run_status")
    if kind not in ROW_TYPES:
        raise _Bad(f"kind = {kind!r} is not one of {', '.join(ROW_TYPES)}")
    if status not in STATUSES:
        raise _Bad(f"run_status = {status!r} is not one of {', '.join(STATUSES)}")
    started = record.get("started_at")
    try:
        datetime.fromisoformat(str(started))
    except ValueError:
        raise _Bad(f"started_at = {started!r} is not an ISO 8601 time") from None
    try:
        pid = int(record.get("run_pid"))
    except (TypeError, ValueError):
        raise _Bad(f"run_pid = {record.get('run_pid')!r} is not a process id") from None
    finished = record.get("run_finished_at") or None
    return {"id": run_id, "kind": kind, "started_at": str(started), "finished_at": finished,
            "status": status, "label": str(record.get("label") or ""),
            "host": str(record.get("run_host") or ""), "pid": pid,
            "reason": str(record.get("run_reason") or "")}


def _runs(records: list[tuple[int, dict]], problems: list[Problem], name: str, *,
          from_csv: bool) -> ExportedRuns:
    runs: dict[int, dict[str, Any]] = {}
    for line, record in records:
        try:
            run = _run_of(record)
            known = runs.setdefault(run["id"], {"run": run, "rows": [], "first": None})
            if known["run"] != run:
                differ = sorted(k for k in run if run[k] != known["run"][k])
                raise _Bad(f"run {run['id']}'s {', '.join(differ)} differ from its first record")
            if record.get("run_environment") not in (None, "") and known["first"] is None:
                options = record.get("run_options")
                known["first"] = (
                    {} if options in (None, "") else _json_field(options, "run_options", from_csv),
                    _json_field(record["run_environment"], "run_environment", from_csv))
            known["rows"].append((line, _row(run["kind"], record, from_csv)))
        except _Bad as exc:
            problems.append(Problem(file=name, line=line, message=str(exc)))
    out, running = [], []
    for run_id, known in runs.items():
        if known["run"]["status"] == "running":
            running.append(run_id)
            continue
        if known["first"] is None:
            problems += [Problem(file=name, line=line, message=f"run {run_id} has no "
                                 "run_environment (the first record of each run carries it)")
                         for line, _ in known["rows"]]
            continue
        options, environment = known["first"]
        rows = tuple(frozen(row) for _, row in known["rows"])
        info = RunInfo(**known["run"], options=frozen(options), environment=frozen(environment),
                       rows=len(rows))
        out.append(StoredRun(info=info, rows=rows))
    problems.sort(key=lambda p: p.line)
    return ExportedRuns(runs=tuple(out), still_running=tuple(running), problems=tuple(problems))

