"""Printing results: JSON for machines, rich tables for people. Shared by every subcommand."""

from __future__ import annotations

import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from enum import Enum
from typing import Any

__all__ = ["to_jsonable", "print_json", "print_table", "console"]


def to_jsonable(obj: Any) -> Any:
    """Plain JSON types from results: objects with ``to_json()``, dataclasses, enums, numpy.

    A NaN or infinity is a bug upstream (results must never carry one), so it raises.
    """
    if hasattr(obj, "to_json"):
        return to_jsonable(obj.to_json())
    if isinstance(obj, Enum):
        return obj.value
    if isinstance(obj, Mapping):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if is_dataclass(obj) and not isinstance(obj, type):
        return to_jsonable(asdict(obj))
    if isinstance(obj, (list, tuple, set, frozenset)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, str):
        return obj
    if isinstance(obj, int):
        return obj
    if isinstance(obj, float) or type(obj).__module__ == "numpy":
        if hasattr(obj, "tolist"):
            return to_jsonable(obj.tolist())
        value = float(obj)
        if not math.isfinite(value):
            raise ValueError(f"refusing to print a non-finite number ({value}) as JSON")
        return value
    raise TypeError(f"cannot turn {type(obj).__name__} into JSON")


def print_json(obj: Any, file=None) -> None:
    json.dump(to_jsonable(obj), file or sys.stdout, indent=2, allow_nan=False)
    (file or sys.stdout).write("\n")


def console(file=None):
    """A rich Console (imported lazily: rich costs start-up time)."""
    from rich.console import Console

    return Console(file=file or sys.stdout, highlight=False, soft_wrap=False)


def print_table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    units: Sequence[str] | None = None,
    caption: str | None = None,
    file=None,
) -> None:
    """A table with an optional units row under the header (nccl-tests style)."""
    from rich.table import Table

    table = Table(title=title, caption=caption, title_justify="left", caption_justify="left")
    for i, name in enumerate(columns):
        header = name if not units or not units[i] else f"{name}\n[dim]{units[i]}[/dim]"
        table.add_column(header, justify="left" if i == 0 else "right")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console(file).print(table)
