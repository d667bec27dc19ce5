"""What can go wrong with the results store's file, said so that a user knows what to do.

SQLite reports a damaged file (``database disk image is malformed``, ``file is not a
database``), a full disk, a lock held past the busy timeout or a read-only file as
``sqlite3`` exceptions; :func:`store_error` turns each into a :class:`StoreError` naming the
file and the way out. The store also creates its folder and file private to the user (0700,
0600, whatever the umask): the file holds host names and the job's environment, and a store
others can write to is a store whose results anyone can change.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from willitscale.errors import StoreError
from willitscale.results.home import store_path

__all__ = ["store_error", "damaged", "newer_store", "create_private", "make_private_dir",
           "salvage_hint"]

PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


def salvage_hint(path: Path) -> str:
    """How to get back what a damaged store still holds."""
    ours = path.resolve() == store_path().resolve()
    command = "willitscale results salvage" + ("" if ours else f" {path}")
    return (f"copy every run still readable into {'a fresh store' if ours else 'this store'} "
            f"with `{command}` (the damaged file is kept{' beside it' if ours else ''}), "
            f"or recover it yourself with `sqlite3 {path} .recover | sqlite3 recovered.sqlite`")


def damaged(path: Path, detail: str) -> StoreError:
    return StoreError(f"results store {path} is damaged ({detail}); {salvage_hint(path)}")


def newer_store(path: Path, version: int, ours: int) -> StoreError:
    from willitscale import __version__

    return StoreError(
        f"results store {path} has schema version {version}, but willitscale {__version__} "
        f"reads versions up to {ours}: a newer willitscale wrote it. Upgrade willitscale "
        f"(pip install -U willitscale) to use it, or set WILLITSCALE_HOME to another folder to "
        f"start a separate store; this one is left unchanged")


def store_error(path: Path, exc: sqlite3.Error, doing: str = "") -> StoreError:
    """The :class:`StoreError` for an ``sqlite3`` exception met while ``doing`` something."""
    text = str(exc)
    what = f" while {doing}" if doing else ""
    if isinstance(exc, sqlite3.OperationalError):
        if "disk is full" in text or "disk I/O error" in text:
            return StoreError(f"results store {path}: {text}{what}. Every row committed before "
                              "is kept; free some space (or set WILLITSCALE_HOME to a folder on "
                              "another disk) and run again")
        if "locked" in text or "busy" in text:
            return StoreError(f"results store {path} stayed locked by another process for "
                              f"more than the busy timeout{what} ({text}); is a benchmark "
                              "still writing to it?")
        if "readonly" in text or "read-only" in text or "unable to open" in text:
            return StoreError(f"results store {path}: {text}{what}; check that the file and "
                              "its folder exist and are writable by you")
        return StoreError(f"results store {path}: {text}{what}")
    if isinstance(exc, sqlite3.DatabaseError):  # malformed pages, not a database, ...
        return damaged(path, text)
    return StoreError(f"results store {path}: {text}{what}")


def make_private_dir(folder: Path) -> None:
    """``folder`` and its missing parents, each made 0700 (existing ones are left as they are):
    ``mkdir(parents=True)`` would make the parents ``0777`` less the umask."""
    missing = []
    while not folder.exists():
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:  # made meanwhile by another process
            continue
        os.chmod(folder, PRIVATE_DIR)  # mkdir's mode is masked by the umask: set it exactly


def create_private(path: Path) -> None:
    """Make ``path``'s missing folders (0700) and the empty file (0600) before SQLite opens it:
    SQLite creates a file ``0666`` less the umask, and its ``-wal``/``-shm``/journal files with
    the permissions of the database file. An existing folder or file is left as it is."""
    try:
        make_private_dir(path.parent)
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, PRIVATE_FILE)
    except FileExistsError:
        return
    except OSError as exc:
        raise StoreError(f"results store {path}: cannot create it ({exc.strerror}); set "
                         "WILLITSCALE_HOME to a folder you can write to") from None
    os.fchmod(fd, PRIVATE_FILE)
    os.close(fd)
