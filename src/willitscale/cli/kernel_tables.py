"""Tables of the kernel benchmarks' rows (``bench attention``, ``bench bandwidth``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["kernel_table"]

_SHORT = {"FLASH_ATTENTION": "flash", "CUDNN_ATTENTION": "cudnn",
          "EFFICIENT_ATTENTION": "efficient", "MATH": "math"}


def _time(us: float | None) -> str:
    if us is None:
        return "-"
    return f"{us:.0f}" if us >= 10_000 else (f"{us:.1f}" if us >= 100 else f"{us:.2f}")


def _attention_line(r: dict[str, Any]) -> list:
    rate = r.get("achieved_TFLOPS")
    status = r["status"] if r["status"] == "ok" else f"{r['status']}: {r['reason'][:60]}"
    return [_SHORT.get(r["backend"], r["backend"]), r["direction"][:3],
            "causal" if r["causal"] else "full", r["head_dim"], r["seq_len"],
            f"{r['batch']}x{r['heads']}", f"{r['flops']:.3g}", _time(r.get("time_us")),
            "-" if rate is None else f"{rate:.3g}", status]


def kernel_table(kind: str, rows: Sequence[dict[str, Any]]):
    """``(title, columns, units, rows)`` to print rows of ``bench attention|bandwidth``."""
    if kind == "attention":
        columns = ["backend", "pass", "mask", "d", "seq", "b x h", "FLOPs", "time", "achieved",
                   "status"]
        units = ["", "", "", "", "", "", "", "(us)", "(TFLOP/s)", ""]
        return "attention", columns, units, [_attention_line(r) for r in rows]
    columns = ["op", "elements", "type", "bytes", "time", "achieved"]
    units = ["", "", "", "(B)", "(us)", "(GB/s)"]
    body = [[r["op"], r["elements"], r["type"], r["size_bytes"], _time(r["time_us"]),
             f"{r['achieved_GBps']:.4g}"] for r in rows]
    return "bandwidth", columns, units, body
