"""A progress bar on stderr, shown by rank 0 only and only on a terminal."""

from __future__ import annotations

import sys
from contextlib import contextmanager
from typing import Any

__all__ = ["progress"]


class _Bar:
    def __init__(self, progress: Any, task: Any):
        self._progress, self._task = progress, task

    def advance(self, description: str | None = None) -> None:
        if self._progress is not None:
            self._progress.update(self._task, advance=1,
                                  **({"description": description} if description else {}))

    def describe(self, description: str) -> None:
        if self._progress is not None:
            self._progress.update(self._task, description=description)


@contextmanager
def progress(total: int, description: str, *, show: bool):
    """``with progress(n, "all_reduce", show=rank == 0) as bar: ... bar.advance()``."""
    if not show or not sys.stderr.isatty():
        yield _Bar(None, None)
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn(), TimeRemainingColumn(),
                   console=Console(file=sys.stderr), transient=True)
    with bar:
        task = bar.add_task(description, total=total)
        yield _Bar(bar, task)
