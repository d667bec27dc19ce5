"""An nccl-tests log as stored collective runs: which op, how many ranks on how many nodes, the
rows as :class:`~willitscale.results.records.CollectiveRow` (pure: parsed sections in, runs out).

What each run needs and where it comes from, in order:

* **the op**: the program nccl-tests names (``# Collective test starting: all_reduce_perf``
  since commit dafb704, 2025-06-03; the JSON's ``args``), else ``--op``. Both, disagreeing,
  is an error. gather, scatter, alltoallv and hypercube have no model here: refused.
* **the ranks**: the ``#  Rank`` lines (one per rank), else ``--ranks``, else the ratio
  busbw / algbw of the row with the largest algbw, which is nccl-tests' fixed factor of the
  rank count (2(n-1)/n for all_reduce, (n-1)/n for all_gather, reduce_scatter, alltoall: the
  count it gives must reproduce every such row's printed busbw). broadcast, reduce and
  sendrecv have factor 1: no rank count without the header or ``--ranks``. Runs split with
  ``NCCL_TESTS_SPLIT`` (several ``Group`` numbers) are refused: every group ran its own
  collective while nccl-tests computed busbw over all ranks.
* **the nodes**: the distinct hosts of the ``#  Rank`` lines, else ``--nodes``, else one node
  when the ``# nThread`` line says one process drove every rank (``nThread x nGpus`` = ranks).
* **#wrong**: ``N/A`` (``-c 0``), and an old log's ``error`` magnitude, are stored as not
  checked (``checked = false``, 0 wrong): calibrate fits them like checked rows.

Every row is checked against its own printed bandwidths: ``algbw = size / time`` (within the
rounding of the printed figures, 2%: the published logs of /work/research/nccl-tests agree to
that) and ``busbw = algbw x factor(ranks)``. A row that disagrees is reported and left out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from willitscale.collectives.metrics import busbw_factor
from willitscale.collectives.ops import Op, parse_op
from willitscale.results.exchange import Problem
from willitscale.results.importers.nccl_tests import LogRow, LogSection
from willitscale.results.records import CollectiveRow

__all__ = ["ImportedRun", "SectionError", "imported_run", "OPS_BY_PROGRAM", "DTYPES"]

#: nccl-tests' binaries -> the op they measure (src/*.cu of github.com/NVIDIA/nccl-tests)
OPS_BY_PROGRAM = {"all_reduce": Op.ALL_REDUCE, "all_gather": Op.ALL_GATHER,
                  "reduce_scatter": Op.REDUCE_SCATTER, "broadcast": Op.BROADCAST,
                  "reduce": Op.REDUCE, "alltoall": Op.ALL_TO_ALL, "sendrecv": Op.SEND_RECV}
#: binaries whose op willitscale does not model
UNMODELLED = ("gather", "scatter", "alltoallv", "hypercube")
#: nccl-tests' type names -> the names willitscale's rows use (torch's)
DTYPES = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16",
          "int8": "int8", "uint8": "uint8", "int32": "int32", "uint32": "uint32",
          "int64": "int64", "uint64": "uint64", "f8e4m3": "float8_e4m3", "f8e5m2": "float8_e5m2",
          "char": "int8", "int": "int32"}
#: a printed algbw may differ from size / printed time by this much (rounding of both)
ALGBW_TOLERANCE = 0.02
#: and by this much absolutely (algbw is printed with two decimals)
ALGBW_SLACK_GBPS = 0.01


class SectionError(Exception):
    """A section that cannot become a run: its :class:`Problem` says why."""

    def __init__(self, problem: Problem):
        self.problem = problem
        super().__init__(str(problem))


@dataclass(frozen=True, slots=True, kw_only=True)
class ImportedRun:
    """What :meth:`Store.add_run` takes for one section, the rows it left out and notes."""

    source: str
    started_at: str
    status: str
    host: str
    pid: int
    options: dict[str, Any]
    environment: dict[str, Any]
    rows: tuple[CollectiveRow, ...]
    problems: tuple[Problem, ...]
    notes: tuple[str, ...]


def _fail(section: LogSection, message: str) -> SectionError:
    return SectionError(Problem(file=section.file, line=section.first_line, message=message))


def _op(section: LogSection, given: str | None) -> Op:
    program = section.program
    name = re.sub(r"_perf.*$", "", program) if program else ""
    if name in UNMODELLED:
        raise _fail(section, f"{program} measures {name}, which willitscale does not model; "
                             f"importable: {', '.join(p + '_perf' for p in OPS_BY_PROGRAM)}")
    from_log = OPS_BY_PROGRAM.get(name)
    if program and from_log is None:
        raise _fail(section, f"program {program!r} is not an nccl-tests benchmark; expected one "
                             f"of {', '.join(p + '_perf' for p in OPS_BY_PROGRAM)}")
    from_flag = parse_op(given, field="--op") if given else None
    if from_log and from_flag and from_log is not from_flag:
        raise _fail(section, f"the log says {program} ({from_log.value}) but --op is "
                             f"{from_flag.value}")
    op = from_log or from_flag
    if op is None:
        raise _fail(section, "which collective is this? The log does not name its program (no "
                             "'# Collective test starting:' line: nccl-tests before 2.15 does not "
                             "print one): give --op, e.g. --op all_reduce")
    return op


def _ranks_from_ratio(op: Op, rows: tuple[LogRow, ...]) -> int | None:
    """The one rank count whose busbw factor reproduces the printed busbw of the row with the
    largest algbw (None when the factor is 1 or several counts fit)."""
    if busbw_factor(op, 2) == busbw_factor(op, 3):
        return None
    best = max(rows, key=lambda r: r.algbw_GBps)
    if best.algbw_GBps < 1.0:
        return None
    slack = 0.006 + 0.006 * 2  # both printed to two decimals, the factor is at most 2
    fits = [n for n in range(2, 65537)
            if abs(best.algbw_GBps * busbw_factor(op, n) - best.busbw_GBps) <= slack]
    return fits[0] if len(fits) == 1 else None


def _ranks(section: LogSection, op: Op, given: int | None) -> tuple[int, str]:
    """The rank count, and where it came from."""
    groups = {r.group for r in section.ranks}
    if len(groups) > 1:
        raise _fail(section, f"the log ran {len(groups)} groups at once (NCCL_TESTS_SPLIT): each "
                             "group ran its own collective while nccl-tests computed busbw over "
                             "all ranks; import a run without NCCL_TESTS_SPLIT")
    header = len({r.rank for r in section.ranks}) or None
    if header and given and header != given:
        raise _fail(section, f"the log lists {header} ranks but --ranks is {given}")
    ratio = _ranks_from_ratio(op, section.rows) if section.rows else None
    count = header or given or ratio
    if count is None:
        raise _fail(section, f"how many ranks? The log has no '#  Rank' lines and {op.value}'s "
                             "busbw does not tell (its factor is 1, or no row reaches 1 GB/s): "
                             "give --ranks N")
    if ratio and ratio != count:
        raise _fail(section, f"the rows' busbw / algbw says {ratio} ranks but "
                             f"{'the log lists' if header else '--ranks is'} {count}")
    return count, ("the '#  Rank' lines" if header else "--ranks" if given
                   else "busbw / algbw of the rows")


def _layout(section: LogSection, ranks: int, given: int | None) -> tuple[int, int | list[int], str]:
    """``(nodes, ranks per node, where from)``."""
    hosts: dict[str, int] = {}
    for r in sorted(section.ranks, key=lambda r: r.rank):
        hosts[r.host] = hosts.get(r.host, 0) + 1
    if hosts:
        if given and given != len(hosts):
            raise _fail(section, f"the log's ranks ran on {len(hosts)} hosts but --nodes is {given}")
        per = list(hosts.values())
        return len(hosts), per[0] if len(set(per)) == 1 else per, "the '#  Rank' lines"
    settings = section.settings
    one_process = settings.get("nthreads", 0) * settings.get("ngpus", 0) == ranks
    nodes = given or (1 if one_process else None)
    if nodes is None:
        raise _fail(section, "on how many nodes? The log has no '#  Rank' lines naming hosts: "
                             "give --nodes N")
    if ranks % nodes:
        raise _fail(section, f"{ranks} ranks do not spread evenly over --nodes {nodes}")
    return nodes, ranks // nodes, "--nodes" if given else "one process drove every rank"


def _row(log: LogRow, op: Op, ranks: int, cputime: bool) -> CollectiveRow:
    """The stored row of a printed half; ValueError when its figures disagree with each other."""
    row = CollectiveRow(op=op, size_bytes=log.size_bytes, count=log.count,
                        dtype=DTYPES.get(log.dtype, log.dtype), redop=log.redop, root=log.root,
                        in_place=log.in_place, ranks=ranks, time=log.time_us * 1e-6,
                        wrong=log.wrong or 0, checked=log.wrong is not None)
    if not cputime:  # -C 1 prints CPU time but computes the bandwidths from GPU time
        algbw = row.algbw / 1e9
        if abs(algbw - log.algbw_GBps) > ALGBW_SLACK_GBPS + ALGBW_TOLERANCE * log.algbw_GBps:
            raise ValueError(f"size / time = {algbw:.4g} GB/s but the line prints algbw "
                             f"{log.algbw_GBps:g} GB/s")
    factor = float(busbw_factor(op, ranks))
    if abs(log.algbw_GBps * factor - log.busbw_GBps) > 0.006 + 0.006 * factor + 0.005 * log.busbw_GBps:
        raise ValueError(f"busbw {log.busbw_GBps:g} GB/s is not algbw {log.algbw_GBps:g} x "
                         f"{factor:.4g} ({op.value} over {ranks} ranks)")
    return row


def _environment(section: LogSection, ranks: int, nodes: int, per_node, origin: dict) -> dict:
    by_rank = sorted(section.ranks, key=lambda r: r.rank)
    hosts: dict[str, dict] = {}
    for r in by_rank:
        host = hosts.setdefault(r.host, {"node": r.host, "hostname": r.host, "gpus": []})
        host["gpus"].append({"index": r.device, "name": r.name, "pci_bus": r.bus})
    local = {h: 0 for h in hosts}
    rank_list = []
    for r in by_rank:
        rank_list.append({"rank": r.rank, "node": r.host, "local_rank": local[r.host],
                          "device": r.name, "pid": r.pid})
        local[r.host] += 1
    return {"world_size": ranks, "nodes": nodes, "ranks_per_node": per_node,
            "backend": section.backend,
            "devices": sorted({r.name for r in by_rank if r.name}), "torch": None, "cuda": None,
            "nccl": section.nccl_version or None, "driver": None, "emulated": None,
            "hosts": list(hosts.values()), "ranks": rank_list, "imported": origin}


def _started_at(section: LogSection, now: str) -> str:
    if section.start_time:
        try:  # nccl-tests writes local time, "%Y-%m-%d %H:%M:%S" (util.cu TIME_STRING_FORMAT)
            return datetime.strptime(section.start_time, "%Y-%m-%d %H:%M:%S").isoformat()
        except ValueError:
            pass
    return now


def imported_run(section: LogSection, *, source: str, origin: dict[str, Any], now: str,
                 op: str | None = None, ranks: int | None = None,
                 nodes: int | None = None) -> ImportedRun:
    """The run of one section; raises :class:`SectionError` when it cannot be one."""
    if not section.rows:
        raise _fail(section, "no table rows in this test (it stopped before its first size?)")
    the_op = _op(section, op)
    count, ranks_from = _ranks(section, the_op, ranks)
    node_count, per_node, nodes_from = _layout(section, count, nodes)
    rows, problems = [], []
    for log in section.rows:
        try:
            rows.append(_row(log, the_op, count, section.cputime))
        except ValueError as exc:
            problems.append(Problem(file=section.file, line=log.line,
                                    message=f"{'in-place' if log.in_place else 'out-of-place'} "
                                            f"half left out: {exc}"))
    notes = [f"ranks from {ranks_from}, nodes from {nodes_from}"]
    headed = bool(section.settings or section.program or section.ranks)
    if not section.complete and headed:
        notes.append("no '# Avg bus bandwidth' footer: the log ends before the test did (stored "
                     "as interrupted)")
    elif not section.complete:
        notes.append("a table without nccl-tests' header and footer (an excerpt?)")
    elif rows and not problems and len(rows) == len(section.rows):
        mean = sum(r.busbw_GBps for r in section.rows) / len(section.rows)
        if abs(mean - section.avg_busbw_GBps) > 0.01 + 1e-3 * section.avg_busbw_GBps:
            notes.append(f"the footer's average busbw {section.avg_busbw_GBps:g} GB/s is not the "
                         f"rows' mean {mean:.4g} GB/s: rows may be missing from the log")
    if any(not r.checked for r in rows):
        notes.append("#wrong not counted in this log (N/A, or an old 'error' column): rows "
                     "stored as not checked")
    if section.cputime:
        notes.append("times are CPU time (-C 1), not latency")
    origin = {**origin, "program": section.program, "nccl_tests_version": section.nccl_tests_version,
              "first_line": section.first_line, "avg_busbw_GBps": section.avg_busbw_GBps,
              "cputime": section.cputime}
    first = min(section.ranks, key=lambda r: r.rank) if section.ranks else None
    return ImportedRun(
        source=source, started_at=_started_at(section, now),
        status="interrupted" if headed and not section.complete else "complete",
        host=first.host if first else "", pid=first.pid if first else 0,
        options={"ops": [the_op.value], "nccl_tests": dict(section.settings)},
        environment=_environment(section, count, node_count, per_node, origin),
        rows=tuple(rows), problems=tuple(problems), notes=tuple(notes))
