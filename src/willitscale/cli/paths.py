"""Output paths given on the command line, checked when the flags are read (before any work).

A typo in a path must not silently make a directory tree (``--html /nonexistent/dir/x.html``
created ``/nonexistent/dir``): a file's directory must exist; ``--plot DIR`` may create ``DIR``
itself, not a missing parent chain. Used as argparse ``type=``; the :class:`ConfigError` they
raise is the usual one-line message.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from willitscale.errors import ConfigError

__all__ = ["output_file", "output_directory", "write_text"]


def _existing_dir(path: Path, field: str, text: str, what: str) -> None:
    parent = path.parent
    if not parent.exists():
        raise ConfigError(field, text, f"{what}: directory {parent} does not exist")
    if not parent.is_dir():
        raise ConfigError(field, text, f"{what}: {parent} is not a directory")


def output_file(field: str) -> Callable[[str], str]:
    """An argparse type: a file to write, in a directory that exists (the text is kept)."""

    def check(text: str) -> str:
        path = Path(text).expanduser()
        if path.is_dir():
            raise ConfigError(field, text, "a file to write, not a directory")
        _existing_dir(path, field, text, "a file in an existing directory")
        return text

    return check


def output_directory(field: str) -> Callable[[str], str]:
    """An argparse type: a directory to write into; it may be created, its parent must exist."""

    def check(text: str) -> str:
        path = Path(text).expanduser()
        if path.exists() and not path.is_dir():
            raise ConfigError(field, text, "a directory, not a file")
        if not path.exists():
            _existing_dir(path, field, text, "a directory whose parent exists (it is created, "
                                             "its parents are not)")
        return text

    return check


def write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path``; a failure (disk full, no permission) names the file."""
    try:
        Path(path).write_text(text, encoding="utf-8")
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(path)) from exc
