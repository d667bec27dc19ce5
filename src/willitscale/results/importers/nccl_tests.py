"""Read nccl-tests' text output: its header, its tables and its footer (pure: text in, values out).

The layout, as nccl-tests writes it (github.com/NVIDIA/nccl-tests at a0b82b2, version 2.19.6:
``src/util.cu`` ``writeDeviceReport``, ``writeResultHeader``, ``writeBenchmarkLinePreamble``,
``writeBenchmarkLineBody``, ``writeResultFooter``)::

    # nccl-tests version 2.17.6 nccl-headers=22602 nccl-library=22602
    # Collective test starting: all_reduce_perf
    # nThread 1 nGpus 1 minBytes 8 maxBytes 134217728 step: 2(factor) warmup iters: 5 ...
    #
    # Using devices
    #  Rank  0 Group  0 Pid  43210 on  node-001 device  0 [0000:18:00] NVIDIA H100 80GB HBM3
    ...
    #       size         count      type   redop    root     time   algbw   busbw  #wrong  ...
    #        (B)    (elements)                               (us)  (GB/s)  (GB/s)          ...
               8             2     float     sum      -1    36.50    0.00    0.00       0  ...
    # Out of bounds values : 0 OK
    # Avg bus bandwidth    : 187.02
    #
    # Collective test concluded: all_reduce_perf

Each table line holds the out-of-place half then the in-place half (``time algbw busbw
#wrong`` each). What older and other runs add is accepted too:

* before nccl-tests 2.13 (commit 51af557, 2022-08-19) rootless ops had no ``root`` column and
  the last column of each half was ``error``, the largest deviation (``2e-07``), not a count of
  wrong elements; ``#  Rank`` lines had no ``Group`` and a ``[0x07]`` bus id;
* ``-c 0`` prints ``N/A`` for ``#wrong``; ``-C 1`` prints CPU time (``cputime``) instead of
  latency; ``-S 1`` ends each line with a timestamp; ``-I 1`` adds four per-iteration columns
  (``i_min i_max i_p99 i_cv%``) to each half; a trace replay leaves the out-of-place half blank;
* launchers' line prefixes (``0:`` from ``srun -l``, ``[1,0]<stdout>:`` from ``mpirun
  --tag-output``), NCCL's own ``NCCL_DEBUG=INFO`` lines between the table's lines, and
  ``NCCL version 2.18.5+cuda12.2`` lines (NCCL_DEBUG=VERSION or INFO);
* the command line, when the log shows it (``mpirun ... ./build/all_reduce_perf -b 8``): it
  names the program when no ``Collective test starting`` line does (before nccl-tests 2.15);
* several tests in one file (a script running ``all_reduce_perf`` then ``all_gather_perf``):
  each header starts a new :class:`LogSection`.

A line that starts like a table row (two integers) but is not one is a :class:`Problem`
naming the file, the line and what was expected; every other row is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Any

from willitscale.results.exchange import Problem

__all__ = ["RankLine", "LogRow", "LogSection", "ParsedLog", "parse_text", "NCCL_TYPES",
           "NCCL_REDOPS", "nccl_version_text"]

#: nccl-tests' type names (src/common.cu ``test_typenames``; ``char``/``int`` before NCCL 2.x)
NCCL_TYPES = ("int8", "uint8", "int32", "uint32", "int64", "uint64", "half", "float", "double",
              "bfloat16", "f8e4m3", "f8e5m2", "char", "int")
#: its reduction names (``test_opnames``), and ``none`` for ops that do not reduce
NCCL_REDOPS = ("sum", "prod", "max", "min", "avg", "mulsum", "none")

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:(?=\s))\s?")
_RANK = re.compile(r"^#\s+Rank\s+(\d+)(?:\s+Group\s+(\d+))?\s+Pid\s+(\d+)\s+on\s+(\S+)\s+"
                   r"device\s+(\d+)\s+\[([^\]]*)\]\s*(.*?)\s*$")
_NTHREAD = re.compile(r"^#\s*nThread\s+(\d+)\s+nGpus\s+(\d+)\s+minBytes\s+(\d+)\s+maxBytes\s+(\d+)"
                      r"\s+step:\s*(\d+)\((factor|bytes)\)\s+warmup iters:\s*(\d+)\s+iters:\s*(\d+)"
                      r"(?:\s+agg iters:\s*(\d+))?")
_VERSION = re.compile(r"^#\s*nccl-tests version\s+(\S+)(?:.*nccl-library=(\d+))?")
_STARTING = re.compile(r"^#\s*Collective test starting:\s*(\S+)")
_CONCLUDED = re.compile(r"^#\s*Collective test concluded")
#: the first line ``bench collectives --format nccl-tests`` writes, naming torch's backend
_WILLITSCALE = re.compile(r"^#\s*willitscale\b.*torch\.distributed, (\w+)\)")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*(\S+)")
#: a command line printed in the log (``mpirun ... /build/all_reduce_perf -b 8 ...``)
_COMMAND = re.compile(r"(?:^|[\s/])([a-z_]+_perf)(?:_\w+)?(?:\s|$)")
_NCCL_VERSION = re.compile(r"NCCL version (\d+\.\d+\.\d+\S*)")
_TIMESTAMP = re.compile(r"^\d{4}-\d{2}-\d{2}$")
#: header lines whose leading '#' was lost (pasted into Markdown, where '#' starts a heading)
_BARE_HEADER = re.compile(r"^(?:nThread\s|Using devices|Rank\s+\d|Avg bus bandwidth|Out of bounds|"
                          r"Collective test|nccl-tests version|size\s+count\s|\(B\)|out-of-place)")
_INT = re.compile(r"^-?\d+$")


@dataclass(frozen=True, slots=True, kw_only=True)
class RankLine:
    """One ``#  Rank`` line: where one rank ran."""

    rank: int
    group: int  #: NCCL_TESTS_SPLIT's group (0 when not split, or before groups existed)
    pid: int
    host: str
    device: int  #: CUDA device index on its host
    bus: str  #: PCI bus id as printed (``0000:18:00``, ``0x18``)
    name: str  #: the device's name (``NVIDIA H100 80GB HBM3``)


@dataclass(frozen=True, slots=True, kw_only=True)
class LogRow:
    """One half (out-of-place or in-place) of one table line, as printed."""

    line: int
    size_bytes: int
    count: int
    dtype: str  #: nccl-tests' name (``float``, ``bfloat16``)
    redop: str
    root: int  #: -1 for rootless ops
    in_place: bool
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    #: wrong elements; None when not counted (``N/A``: ``-c 0``; or an old log's ``error``)
    wrong: int | None


@dataclass(frozen=True, slots=True, kw_only=True)
class LogSection:
    """One test of a log: its header, its rows and its footer (each None/empty when absent)."""

    file: str
    first_line: int
    program: str = ""  #: ``all_reduce_perf``, from ``Collective test starting`` or the JSON's args
    nccl_tests_version: str = ""
    nccl_version: str = ""
    settings: dict[str, Any] = field(default_factory=dict)  #: the ``# nThread`` line's values
    ranks: tuple[RankLine, ...] = ()
    rows: tuple[LogRow, ...] = ()
    avg_busbw_GBps: float | None = None  #: the ``# Avg bus bandwidth`` footer
    cputime: bool = False  #: ``-C 1``: times are CPU time, not latency
    error_column: bool = False  #: an ``error`` magnitude, not ``#wrong`` (before nccl-tests 2.13)
    start_time: str = ""  #: when the test started (the JSON's ``start_time``)
    #: the library that ran the collectives: nccl-tests runs NCCL; ``bench collectives --format
    #: nccl-tests`` says which torch.distributed backend it used in its first line
    backend: str = "nccl"

    @property
    def complete(self) -> bool:
        """Whether the log reached the footer (a sweep cut short has rows but no footer)."""
        return self.avg_busbw_GBps is not None


@dataclass(frozen=True, slots=True, kw_only=True)
class ParsedLog:
    sections: tuple[LogSection, ...]
    problems: tuple[Problem, ...]


def nccl_version_text(code: int) -> str:
    """``22602`` -> ``2.26.2`` (NCCL_VERSION_CODE: ``major*10000 + minor*100 + patch`` from
    2.9, ``major*1000 + minor*100 + patch`` before)."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


class _BadRow(Exception):
    """A table line that is not one (its message says what was expected)."""


def _strip_prefix(line: str) -> str:
    return _PREFIX.sub("", line, count=1).rstrip("\r\n")


def _is_row_candidate(tokens: list[str]) -> bool:
    return len(tokens) >= 2 and tokens[0].isdigit() and tokens[1].isdigit()


def _number(token: str, what: str) -> float:
    try:
        return float(token)
    except ValueError:
        raise _BadRow(f"{what} is {token!r}, not a number") from None


def _wrong(token: str, error_column: bool) -> tuple[int | None, bool]:
    """``(wrong elements or None, whether the column is an old error magnitude)``."""
    if token == "N/A":
        return None, error_column
    value = _number(token, "#wrong")
    old = error_column or "." in token or "e-" in token or token.endswith("e+00")
    if old:
        return None, True
    if value < 0 or value != int(value):
        raise _BadRow(f"#wrong is {token!r}, not a count of elements")
    return int(value), False


def _halves(body: list[str]) -> list[tuple[bool, list[str]]]:
    """The out-of-place and in-place halves of a row's numbers: 8 (both), 16 (``-I``: four
    per-iteration columns each), or 4 (the out-of-place half left blank)."""
    if len(body) == 8:
        return [(False, body[:4]), (True, body[4:])]
    if len(body) == 16:
        return [(False, body[:4]), (True, body[8:12])]
    if len(body) == 4:
        return [(True, body)]
    raise _BadRow(f"{len(body)} numbers after the redop/root columns; expected 8 (time, algbw, "
                  "busbw, #wrong out-of-place then in-place), 16 (with -I) or 4")


def parse_row(text: str, line: int, error_column: bool) -> tuple[list[LogRow], bool]:
    """The rows of one table line, and whether it used the old ``error`` column."""
    tokens = text.split()
    if len(tokens) >= 2 and ":" in tokens[-1] and _TIMESTAMP.match(tokens[-2]):
        tokens = tokens[:-2]  # -S 1: a timestamp after the in-place half
    if len(tokens) < 8:
        raise _BadRow(f"{len(tokens)} columns; expected size, count, type, redop, [root], then "
                      "time, algbw, busbw and #wrong for each half")
    size, count, dtype, redop, rest = int(tokens[0]), int(tokens[1]), tokens[2], tokens[3], tokens[4:]
    if dtype not in NCCL_TYPES:
        raise _BadRow(f"type is {dtype!r}; expected one of nccl-tests' types ({', '.join(NCCL_TYPES)})")
    if redop not in NCCL_REDOPS:
        raise _BadRow(f"redop is {redop!r}; expected one of {', '.join(NCCL_REDOPS)}")
    root = -1
    if len(rest) in (5, 9, 17) and _INT.match(rest[0]):
        root, rest = int(rest[0]), rest[1:]
    rows, old = [], error_column
    for in_place, half in _halves(rest):
        wrong, old = _wrong(half[3], old)
        time = _number(half[0], "time")
        if time <= 0:
            raise _BadRow(f"time is {half[0]!r}; expected a positive number of microseconds")
        rows.append(LogRow(line=line, size_bytes=size, count=count, dtype=dtype, redop=redop,
                           root=root, in_place=in_place, time_us=time,
                           algbw_GBps=_number(half[1], "algbw"), busbw_GBps=_number(half[2], "busbw"),
                           wrong=wrong))
    return rows, old


class _Builder:
    """The section being read, and the finished ones."""

    def __init__(self, file: str):
        self.file = file
        self.done: list[LogSection] = []
        self.current: LogSection | None = None
        self.rows: list[LogRow] = []
        self.ranks: list[RankLine] = []
        self.command = ""  #: the program of a command line seen before the next section

    def section(self, line: int) -> LogSection:
        if self.current is None:
            self.current = LogSection(file=self.file, first_line=line, program=self.command)
            self.command = ""
        return self.current

    def command_line(self, program: str) -> None:
        """A command line naming an nccl-tests binary: the program of the next section (or of
        the current one, when it has neither a program nor rows yet)."""
        if self.current is not None and not self.current.program and not self.rows:
            self.current = replace(self.current, program=program)
        else:
            self.command = program

    def update(self, line: int, **changes) -> None:
        self.current = replace(self.section(line), **changes)

    def has_header(self) -> bool:
        c = self.current
        return c is not None and bool(c.settings or c.program or c.nccl_tests_version)

    def start(self, line: int) -> None:
        """A new test's header begins: close the current section if it has anything."""
        if self.current is not None and (self.rows or self.current.complete or self.has_header()):
            self.close()
        self.section(line)

    def close(self) -> None:
        if self.current is not None and (self.rows or self.has_header() or self.ranks):
            self.done.append(replace(self.current, rows=tuple(self.rows), ranks=tuple(self.ranks)))
        self.current, self.rows, self.ranks = None, [], []


def _header_line(b: _Builder, text: str, number: int) -> None:
    if m := _VERSION.match(text):
        b.start(number)
        b.update(number, nccl_tests_version=m[1],
                 **({"nccl_version": nccl_version_text(int(m[2]))} if m[2] else {}))
    elif m := _WILLITSCALE.match(text):
        b.start(number)
        b.update(number, backend=m[1])
    elif m := _STARTING.match(text):
        if b.current is None or b.current.program or b.rows or b.current.settings:
            b.start(number)
        b.update(number, program=m[1])
    elif m := _NTHREAD.match(text):
        if b.current is None or b.current.settings or b.rows:
            b.start(number)
        keys = ("nthreads", "ngpus", "minimum_bytes", "maximum_bytes", "step", "step_kind",
                "warmup_iters", "iterations", "aggregated_iterations")
        values = {k: (v if k == "step_kind" else int(v)) for k, v in zip(keys, m.groups()) if v}
        b.update(number, settings=values)
    elif m := _RANK.match(text):
        b.section(number)
        b.ranks.append(RankLine(rank=int(m[1]), group=int(m[2] or 0), pid=int(m[3]), host=m[4],
                                device=int(m[5]), bus=m[6], name=m[7]))
    elif "size" in text and "count" in text and ("#wrong" in text or "error" in text):
        b.update(number, error_column="#wrong" not in text and "error" in text,
                 cputime="cputime" in text)
    elif m := _AVG.match(text):
        try:
            b.update(number, avg_busbw_GBps=float(m[1]))
        except ValueError:
            pass
    elif _CONCLUDED.match(text):
        b.close()


def parse_text(text: str, file: str) -> ParsedLog:
    """Every test section of an nccl-tests log, and the lines that could not be read."""
    b = _Builder(file)
    problems: list[Problem] = []
    nccl_version = ""  # NCCL's own version line: it comes after the header it belongs to
    for number, raw in enumerate(text.splitlines(), start=1):
        line = _strip_prefix(raw)
        if m := _NCCL_VERSION.search(line):
            nccl_version = nccl_version or m[1]
            if b.current is not None:  # NCCL's own line (with +cudaX.Y) over nccl-library=
                b.update(number, nccl_version=m[1])
        stripped = line.strip()
        if stripped.startswith("#") or _BARE_HEADER.match(stripped):
            _header_line(b, stripped if stripped.startswith("#") else "# " + stripped, number)
            continue
        tokens = stripped.split()
        if not _is_row_candidate(tokens):  # NCCL_DEBUG output, launcher messages, blank lines
            if (m := _COMMAND.search(stripped)) and "NCCL INFO" not in stripped:
                b.command_line(m[1])
            continue
        try:
            rows, old = parse_row(stripped, number, b.current.error_column if b.current else False)
        except _BadRow as exc:
            problems.append(Problem(file=file, line=number,
                                    message=f"not an nccl-tests row: {exc}: {stripped[:60]!r}"))
            continue
        if b.current is not None and b.current.complete:  # rows after a footer: a new test
            b.close()
        b.section(number)
        if old and not b.current.error_column:
            b.update(number, error_column=True)
        b.rows += rows
    b.close()
    sections = tuple(s if s.nccl_version or not nccl_version else replace(s, nccl_version=nccl_version)
                     for s in b.done)
    return ParsedLog(sections=sections, problems=tuple(problems))
