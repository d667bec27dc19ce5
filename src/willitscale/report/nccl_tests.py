"""Collective rows printed in nccl-tests' own layout (``bench collectives --format nccl-tests``).

Column widths and number formats are nccl-tests' (github.com/NVIDIA/nccl-tests at a0b82b2,
``src/util.cu``: ``writeDeviceReport``, ``writeResultHeader``, ``writeBenchmarkLinePreamble``
``"%12li  %12li  %8s  %6s  %6s"``, ``writeBenchmarkLineBody`` ``"  %7s  %6s  %6s  %6g"`` with
``getFloatStr``, ``writeResultFooter``), so scripts and eyes used to nccl-tests read it as they
read nccl-tests, and ``results import-nccl-tests`` reads it back. One section per op, as
nccl-tests runs one binary per op. What differs, and is said in the first line: it is
willitscale's measurement (torch.distributed), not nccl-tests', so there is no ``nccl-tests
version`` line; a half torch cannot measure (out-of-place all_reduce, in-place all_to_all) is
left blank, as nccl-tests leaves a half it does not run.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["nccl_tests_text", "float_text", "NCCL_TYPE_NAMES", "PROGRAMS"]

#: willitscale's dtype names -> nccl-tests' (src/common.cu ``test_typenames``)
NCCL_TYPE_NAMES = {"float32": "float", "float16": "half", "float64": "double",
                   "bfloat16": "bfloat16", "int8": "int8", "uint8": "uint8", "int32": "int32",
                   "uint32": "uint32", "int64": "int64", "uint64": "uint64"}
#: op -> the nccl-tests binary that measures it
PROGRAMS = {"all_reduce": "all_reduce_perf", "all_gather": "all_gather_perf",
            "reduce_scatter": "reduce_scatter_perf", "broadcast": "broadcast_perf",
            "reduce": "reduce_perf", "all_to_all": "alltoall_perf", "send_recv": "sendrecv_perf"}
#: what nccl-tests prints for a half it did not run (``writeBenchMarkLineNullBody``)
_NULL_BODY = " " * 32


def float_text(value: float, width: int) -> str:
    """nccl-tests' ``getFloatStr``: two decimals, else one, else none, else an exponent, the
    first that fits ``width``."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        text = fmt % value
        if len(text) <= width:
            return text
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % value


def _body(row: Mapping[str, Any] | None) -> str:
    if row is None:
        return _NULL_BODY
    head = (f"  {float_text(row['time_us'], 7):>7s}  {float_text(row['algbw_GBps'], 6):>6s}  "
            f"{float_text(row['busbw_GBps'], 6):>6s}")
    return head + ("  %6g" % row["wrong"] if row.get("checked", True) else "    N/A")


def _header(op: str, options: Mapping[str, Any], env: Mapping[str, Any], tool: str) -> list[str]:
    factor, step = options.get("factor"), options.get("step_bytes")
    step_text = f"{int(factor) if factor == int(factor) else factor}(factor)" if factor else f"{step}(bytes)"
    lines = [f"# {tool}: willitscale's measurement (torch.distributed, {env.get('backend')}) in "
             "nccl-tests' layout",
             f"# Collective test starting: {PROGRAMS[op]}",
             f"# nThread 1 nGpus 1 minBytes {options.get('min_bytes')} maxBytes "
             f"{options.get('max_bytes')} step: {step_text} warmup iters: {options.get('warmup')} "
             f"iters: {options.get('iters')} agg iters: 1 validation: {int(bool(options.get('check', True)))} "
             "graph: 0", "#", "# Using devices"]
    hosts = {h.get("node"): h for h in env.get("hosts") or ()}
    for r in env.get("ranks") or ():
        gpus = hosts.get(r.get("node"), {}).get("gpus") or []
        local = r.get("local_rank") or 0
        bus = gpus[local].get("pci_bus") if local < len(gpus) else "cpu"
        host = hosts.get(r.get("node"), {}).get("hostname") or str(r.get("node"))
        lines.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%s] %s" % (
            r["rank"], 0, r.get("pid") or 0, host, local, bus, r.get("device") or "?"))
    lines += ["#",
              "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
              % ("", "", "", "", ""),
              "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s " % (
                  "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong",
                  "time", "algbw", "busbw", "#wrong"),
              "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s " % (
                  "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)",
                  "(GB/s)", "(GB/s)", "")]
    return lines


def _table(rows: Sequence[Mapping[str, Any]]) -> list[str]:
    lines, by_point = [], {}
    for r in rows:  # one line per size (and type, redop, root): out-of-place then in-place
        key = (r["size_bytes"], r["count"], r["type"], r["redop"], r["root"])
        by_point.setdefault(key, {})[bool(r["in_place"])] = r
    for (size, count, dtype, redop, root), halves in by_point.items():
        preamble = "%12li  %12li  %8s  %6s  %6i" % (size, count, NCCL_TYPE_NAMES.get(dtype, dtype),
                                                   redop, root)
        line = preamble + _body(halves.get(False)) + (_body(halves[True]) if True in halves else "")
        lines.append(line.rstrip())
    return lines


def _footer(op: str, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    bad = sum(1 for r in rows if r.get("wrong"))
    mean = sum(r["busbw_GBps"] for r in rows) / len(rows) if rows else 0.0
    return ["# %-20s : %d %s" % ("Out of bounds values", bad, "FAILED" if bad else "OK"),
            "# %-20s : %g " % ("Avg bus bandwidth", mean), "#",
            f"# Collective test concluded: {PROGRAMS[op]}"]


def nccl_tests_text(rows: Sequence[Mapping[str, Any]], *, options: Mapping[str, Any],
                    environment: Mapping[str, Any], tool: str = "willitscale") -> str:
    """The rows (as ``CollectiveRow.to_json`` writes them) in nccl-tests' layout, one section
    per op in the order measured."""
    ops = list(dict.fromkeys(r["op"] for r in rows)) or list(options.get("ops") or ())
    out: list[str] = []
    for op in ops:
        mine = [r for r in rows if r["op"] == op]
        out += _header(op, options, environment, tool) + _table(mine) + _footer(op, mine)
    return "\n".join(out) + "\n"
