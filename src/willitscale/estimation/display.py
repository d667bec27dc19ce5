"""Notebook display: the small HTML tables that ``_repr_html_`` of the results returns.

Jupyter shows an object's ``_repr_html_`` instead of its ``repr``; the tables here are plain
HTML (every value escaped, no styling dependency) so they render the same in JupyterLab, VS Code
and a static HTML export.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from html import escape

__all__ = ["html_table"]


def html_table(caption: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """An HTML ``<table>`` with ``caption``, one header row and ``rows``, every cell escaped."""
    head = "".join(f"<th>{escape(str(h))}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>"
                   for row in rows)
    return (f"<table><caption>{escape(caption)}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
