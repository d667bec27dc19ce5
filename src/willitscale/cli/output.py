"""Printing results: JSON for machines, rich tables for people. Shared by every subcommand."""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, is_dataclass
from enum import Enum
from typing import Any

__all__ = ["to_jsonable", "print_json", "print_table", "console", "output_width", "Prose"]


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


#: the width of piped output when COLUMNS is not set: in effect, lines are not wrapped
UNWRAPPED = 10_000


def output_width(file) -> int | None:
    """The width to lay ``file``'s output out at: ``None`` (rich's own: the terminal's, or
    ``COLUMNS`` when set) for a terminal or when ``COLUMNS`` is set; :data:`UNWRAPPED` for a
    pipe or a file without ``COLUMNS``.

    Piped output has no width to fit: wrapping it at rich's fallback of 80 columns would squeeze
    tables (cells cut to ``all_r…``) and break notes mid-phrase for a reader who is probably a
    file, ``grep``, a pager or a CI log. So each table keeps its natural width and each note
    stays on one line; ``COLUMNS=80 willitscale ... | cat`` lays it out for 80 columns (as the
    docs' checked examples are).
    """
    import os

    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return None
    try:
        terminal = file.isatty()
    except (AttributeError, ValueError):  # closed, or not a real file
        terminal = False
    return None if terminal else UNWRAPPED


def console(file=None):
    """A rich Console for ``file`` (default stdout) at :func:`output_width`, whose ``print`` of a
    string wraps it between phrases with a hanging indent (:mod:`willitscale.cli.linebreaks`).
    Imported lazily: rich costs start-up time."""
    out = file or sys.stdout
    return _console_class()(file=out, highlight=False, soft_wrap=False, width=output_width(out))


@functools.cache
def _console_class():
    """rich's Console whose ``print`` of one string lays it out as :class:`Prose`."""
    from rich.console import Console

    class ProseConsole(Console):
        def print(self, *objects, **kwargs):  # type: ignore[override]
            if len(objects) == 1 and isinstance(objects[0], str) and \
                    not set(kwargs) - {"style", "markup", "highlight", "emoji", "end"}:
                text = self.render_str(objects[0], markup=kwargs.pop("markup", None),
                                       highlight=kwargs.pop("highlight", None),
                                       emoji=kwargs.pop("emoji", None))
                objects = (Prose(text),)
            super().print(*objects, **kwargs)

    return ProseConsole


class Prose:
    """A rich renderable: text (rich ``Text``, markup already parsed) wrapped at the console's
    width by :func:`~willitscale.cli.linebreaks.line_breaks`, each line's continuations indented
    two spaces past its own indent."""

    def __init__(self, text) -> None:
        self.text = text

    def __rich_console__(self, console, options):
        from rich.segment import Segment

        from willitscale.cli.linebreaks import line_breaks

        width = options.max_width
        for line in self.text.split("\n", allow_blank=True):
            plain = line.plain
            hang = min(len(plain) - len(plain.lstrip(" ")) + 2, width // 2)
            for i, (a, b) in enumerate(line_breaks(plain, width, hang=hang)):
                if i:
                    yield Segment(" " * hang)
                yield from line[a:b].render(console, end="")
                yield Segment.line()


def _fits(out, table) -> bool:
    from rich.measure import Measurement

    return Measurement.get(out, out.options.update_width(UNWRAPPED), table).maximum <= out.width


def print_table(
    title: str | None,
    columns: Sequence[str],
    rows: Iterable[Sequence[Any]],
    *,
    units: Sequence[str] | None = None,
    caption: str | None = None,
    file=None,
) -> None:
    """A table with an optional units row under the header (nccl-tests style).

    The title and caption are printed as prose (wrapped between phrases at the console's width,
    not squeezed into the table's). Titles, captions, headers and cells are plain text: a
    ``[`` in them (a run label ``[/]``, a path) is printed as it is, never read as rich markup. A table wider than the console drops its outer border and
    inner padding first; if it still does not fit, long cells fold onto a second line (never
    cut to ``…``).
    """
    from rich import box
    from rich.markup import escape
    from rich.table import Table
    from rich.text import Text

    out = console(file)
    table = Table(title_justify="left", caption_justify="left")
    for i, name in enumerate(columns):
        header = escape(name) if not units or not units[i] else \
            f"{escape(name)}\n[dim]{escape(units[i])}[/dim]"
        table.add_column(header, justify="left" if i == 0 else "right", overflow="fold")
    for row in rows:  # cells are data (run labels, hosts, paths): never read as rich markup
        table.add_row(*(Text("" if v is None else str(v)) for v in row))
    if not _fits(out, table):
        table.box, table.show_edge, table.pad_edge = box.SIMPLE_HEAD, False, False
        table.collapse_padding = True
    if title:
        out.print(f"[table.title]{escape(title)}[/table.title]")
    out.print(table)
    if caption:
        out.print(f"[table.caption]{escape(caption)}[/table.caption]")
