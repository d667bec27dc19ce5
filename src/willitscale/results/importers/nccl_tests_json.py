"""Read nccl-tests' JSON output (``-J FILE.json``) into the sections the text reader gives.

nccl-tests writes it since commit 00f5281 (2025-10-17, "Add support for JSON output to perf
test framework"); the layout read here is ``src/util.cu`` at a0b82b2 (nccl-tests 2.19.6,
``JSON_FILE_VERSION 3``; versions 1 and 2 differ only in what is read as optional here)::

    {"version": 3, "start_time": "2026-07-09 16:03:21", "args": ["./build/all_reduce_perf", ...],
     "env": [...], "nccl_version": 22602,
     "config": {"nthreads": 1, "ngpus": 1, "minimum_bytes": 8, "maximum_bytes": 134217728,
                "step_factor": 2, "warmup_iters": 5, "iterations": 20, ...,
                "devices": [{"rank": 0, "group": 0, "pid": 4321, "hostname": "node-001",
                             "device": 0, "device_hex": "0000:18:00",
                             "device_info": "NVIDIA H100 80GB HBM3"}, ...]},
     "results": [{"size": 8, "count": 2, "type": "float", "redop": "sum", "root": "    -1",
                  "out_of_place": {"time": 36.5, "alg_bw": 0.0, "bus_bw": 0.0, "nwrong": 0.0},
                  "in_place": {...}, "actual_iterations": 20, "experiment_name": ""}, ...],
     "out_of_bounds": {"count": 0, "okay": "true"},
     "average_bus_bandwidth": {"bandwidth": 187.02, "okay": "unchecked"},
     "errors": [], "end_time": "..."}

(version 1 spelt the footer ``average_bus_bandwidith``/``bandwidith``; ``-C 1`` writes
``cpu_time`` for ``time``; ``nwrong`` is null under ``-c 0``; a half not run is null.) The
file is written as the test runs, so a test killed part-way leaves it cut off: the results
before the cut are read and the cut is reported (:class:`~willitscale.results.exchange.Problem`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from willitscale.results.exchange import Problem
from willitscale.results.importers.nccl_tests import (
    NCCL_REDOPS,
    NCCL_TYPES,
    LogRow,
    LogSection,
    ParsedLog,
    RankLine,
    nccl_version_text,
)

__all__ = ["parse_json", "KNOWN_VERSIONS"]

KNOWN_VERSIONS = (1, 2, 3)
_RESULTS = re.compile(r'"results"\s*:\s*\[')


class _Bad(Exception):
    pass


def _line_of(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _header(text: str, file: str) -> tuple[dict[str, Any], int | None, list[Problem]]:
    """The top-level fields (all of them when the file parses, else those before
    ``"results"``), where the results list starts, and problems."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    m = _RESULTS.search(text)
    if isinstance(data, dict):
        return data, (m.end() if m else None), []
    if not m:
        raise _Bad("not nccl-tests JSON output (no \"results\" list)")
    head = text[:m.start()].rstrip().rstrip(",") + "}"
    try:
        data = json.loads(head)
    except json.JSONDecodeError as exc:
        raise _Bad(f"not nccl-tests JSON output: the fields before \"results\" do not parse "
                   f"({exc.msg} at line {exc.lineno} column {exc.colno})") from None
    if not isinstance(data, dict):
        raise _Bad("not nccl-tests JSON output (expected an object)")
    return data, m.end(), []


def _results(text: str, start: int, file: str) -> tuple[list[tuple[int, Any]], list[Problem], bool]:
    """Each result object with its line, problems, and whether the list was closed."""
    decoder = json.JSONDecoder()
    out, problems, pos = [], [], start
    while True:
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text):
            problems.append(Problem(file=file, line=_line_of(text, pos), message=(
                "the results list ends without ']' (the file was cut off: the test was killed "
                f"or is still running); the {len(out)} results before the cut were read")))
            return out, problems, False
        if text[pos] == "]":
            return out, problems, True
        try:
            record, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as exc:
            problems.append(Problem(file=file, line=exc.lineno, message=(
                f"result {len(out) + 1} (character {pos}) does not parse: {exc.msg}; expected a "
                f"result object such as {{\"size\": 8, \"count\": 2, ...}}; the {len(out)} results "
                "before it were read, the rest are not")))
            return out, problems, False
        out.append((_line_of(text, pos), record))
        pos = end


def _half(record: Mapping[str, Any], key: str) -> Mapping[str, Any] | None:
    half = record.get(key)
    if half is None:
        return None
    if not isinstance(half, Mapping):
        raise _Bad(f"{key} is {half!r}; expected an object with time, alg_bw, bus_bw, nwrong")
    return half


def _num(half: Mapping[str, Any], *keys: str) -> float:
    for key in keys:
        if key in half:
            value = half[key]
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise _Bad(f"{key} is {value!r}; expected a number")
            return float(value)
    raise _Bad(f"no {' or '.join(keys)} field")


def _rows(line: int, record: Any, result_no: int) -> list[LogRow]:
    if not isinstance(record, Mapping):
        raise _Bad(f"result {result_no} is {type(record).__name__}; expected an object")
    try:
        size, count = int(record["size"]), int(record["count"])
        dtype, redop = str(record["type"]), str(record["redop"])
        root = int(str(record.get("root", "-1")).strip())
    except (KeyError, TypeError, ValueError) as exc:
        raise _Bad(f"result {result_no}: size, count, type, redop and root expected "
                   f"({type(exc).__name__}: {exc})") from None
    if dtype not in NCCL_TYPES or redop not in NCCL_REDOPS:
        raise _Bad(f"result {result_no}: type {dtype!r} / redop {redop!r}; expected one of "
                   f"{', '.join(NCCL_TYPES)} / {', '.join(NCCL_REDOPS)}")
    rows = []
    for key, in_place in (("out_of_place", False), ("in_place", True)):
        half = _half(record, key)
        if half is None:
            continue
        time = _num(half, "time", "cpu_time")
        wrong = half.get("nwrong")
        if time <= 0:
            raise _Bad(f"result {result_no}: {key} time is {time}; expected a positive number of us")
        rows.append(LogRow(line=line, size_bytes=size, count=count, dtype=dtype, redop=redop,
                           root=root, in_place=in_place, time_us=time,
                           algbw_GBps=_num(half, "alg_bw"), busbw_GBps=_num(half, "bus_bw"),
                           wrong=None if wrong is None else int(wrong)))
    return rows


def _ranks(devices: Any) -> tuple[RankLine, ...]:
    if not isinstance(devices, list):
        return ()
    out = []
    for d in devices:
        try:
            out.append(RankLine(rank=int(d["rank"]), group=int(d.get("group", 0)),
                                pid=int(d.get("pid", 0)), host=str(d["hostname"]),
                                device=int(d.get("device", 0)), bus=str(d.get("device_hex", "")),
                                name=str(d.get("device_info", "")).strip()))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise _Bad(f"config.devices entry {d!r}: rank and hostname expected") from None
    return tuple(out)


def _section(data: Mapping[str, Any], rows: list[LogRow], file: str, cputime: bool) -> LogSection:
    config = data.get("config") if isinstance(data.get("config"), Mapping) else {}
    args = data.get("args") if isinstance(data.get("args"), list) else []
    footer = data.get("average_bus_bandwidth", data.get("average_bus_bandwidith"))
    avg = None
    if isinstance(footer, Mapping):
        value = footer.get("bandwidth", footer.get("bandwidith"))
        avg = float(value) if isinstance(value, (int, float)) else None
    code = data.get("nccl_version")
    settings = {k: v for k, v in config.items() if k != "devices"}
    return LogSection(
        file=file, first_line=1, program=PurePath(str(args[0])).name if args else "",
        nccl_version=nccl_version_text(code) if isinstance(code, int) and code > 0 else "",
        settings=settings, ranks=_ranks(config.get("devices")), rows=tuple(rows),
        avg_busbw_GBps=avg, start_time=str(data.get("start_time") or ""),
        cputime=cputime)


def parse_json(text: str, file: str) -> ParsedLog:
    """The one section of an nccl-tests JSON file, and what could not be read."""
    try:
        data, start, problems = _header(text, file)
        version = data.get("version")
        if not isinstance(version, int) or "results" not in data and start is None:
            raise _Bad(f"not nccl-tests JSON output: version is {version!r} (expected nccl-tests' "
                       "JSON_FILE_VERSION, 1-3) and a \"results\" list is expected")
    except _Bad as exc:
        return ParsedLog(sections=(), problems=(Problem(file=file, line=1, message=str(exc)),))
    if version not in KNOWN_VERSIONS:
        problems.append(Problem(file=file, line=1, message=(
            f"JSON_FILE_VERSION {version} is newer than the versions read here "
            f"({', '.join(map(str, KNOWN_VERSIONS))}): the fields of version 3 were read")))
    if isinstance(data.get("results"), list):
        results = [(1, r) for r in data["results"]]
    elif start is not None:
        results, bad, _ = _results(text, start, file)
        problems += bad
    else:
        results = []
    rows: list[LogRow] = []
    for number, (line, record) in enumerate(results, start=1):
        try:
            rows += _rows(line, record, number)
        except _Bad as exc:
            problems.append(Problem(file=file, line=line, message=str(exc)))
    try:
        section = _section(data, rows, file, cputime='"cpu_time"' in text)
    except _Bad as exc:
        return ParsedLog(sections=(), problems=(*problems, Problem(file=file, line=1,
                                                                    message=str(exc))))
    return ParsedLog(sections=(section,), problems=tuple(problems))
