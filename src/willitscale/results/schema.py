"""The results store's schema and its versions: one baseline, then an ordered list of migrations.

A store records its version in ``meta.schema_version``. Version 1 is the schema every store
made before versioning was checked has (main at 69473e3; ``tests/data/store-69473e3`` is
one). Each later version is one entry of :data:`MIGRATIONS`: a small function that changes a
version ``n - 1`` store into a version ``n`` one, in place, inside the transaction that opens
the store. So:

* a new store is made as version 1 and brought up by every migration (one code path: the
  newest schema is always exactly what migrating an old store gives);
* an older store is brought up by the migrations it lacks, all in one transaction (a crash
  or a second process opening it at the same time leaves it either untouched or migrated);
* a newer store (written by a later release) is refused with a message saying what to do:
  this release cannot know what the newer columns mean.

To add a field (a new column, table or index), append a migration; never edit the baseline
or an existing migration, since stores in the wild went through them. A migration only adds:
tables, columns with a default, indexes. docs/measure.md ("Store versions") says the same
for other contributors, and ``tests/unit/test_store_schema.py`` migrates a store of every
older version to the newest.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["SCHEMA_VERSION", "MIGRATIONS", "Migration", "NewerStoreError", "stored_version",
           "create_or_upgrade", "create_at_version"]

#: version 1, as main at 69473e3 wrote it (never edit: stores in the wild have it)
BASELINE = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    status TEXT NOT NULL,
    label TEXT NOT NULL DEFAULT '',
    options TEXT NOT NULL,
    environment TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS rows (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    data TEXT NOT NULL,
    UNIQUE (run_id, seq)
);
CREATE TABLE IF NOT EXISTS calibrations (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    created_at TEXT NOT NULL,
    path TEXT NOT NULL,
    runs TEXT NOT NULL,
    toml TEXT NOT NULL
);
"""


@dataclass(frozen=True, slots=True, kw_only=True)
class Migration:
    """What version ``to`` adds, and the function that adds it to a version ``to - 1`` store."""

    to: int
    adds: str  #: one line for people: shown when a store is migrated
    apply: Callable[[sqlite3.Connection], None]


def _add_run_reason(db: sqlite3.Connection) -> None:
    db.execute("ALTER TABLE runs ADD COLUMN reason TEXT NOT NULL DEFAULT ''")


#: every migration, oldest first; ``to`` counts up from 2 with no gaps (a test checks it)
MIGRATIONS: tuple[Migration, ...] = (
    Migration(to=2, adds="runs.reason: why a run failed or stopped (which rank, which signal)",
              apply=_add_run_reason),
)

SCHEMA_VERSION = 1 + len(MIGRATIONS)


class NewerStoreError(Exception):
    """The store was written by a later release (its version is above :data:`SCHEMA_VERSION`)."""

    def __init__(self, version: int):
        self.version = version
        super().__init__(f"schema version {version}")


def stored_version(db: sqlite3.Connection) -> int | None:
    """The store's schema version; ``None`` for an empty database (nothing created yet)."""
    has_meta = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'meta'"
                          ).fetchone()
    if not has_meta:
        return None
    row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is None:  # a version-1 store interrupted between creating meta and filling it
        return 1
    try:
        return int(row[0])
    except ValueError:
        raise sqlite3.DatabaseError(f"meta.schema_version is {row[0]!r}, not a number") from None


def _set_version(db: sqlite3.Connection, version: int) -> None:
    db.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
               "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (str(version),))


def create_at_version(db: sqlite3.Connection, version: int) -> None:
    """Create (or bring up) the schema of ``version``: the baseline, then the migrations up
    to it. Inside the caller's transaction. Tests use it to make stores of older versions."""
    if not 1 <= version <= SCHEMA_VERSION:
        raise ValueError(f"schema version {version} is not between 1 and {SCHEMA_VERSION}")
    current = stored_version(db)
    if current is None:
        for statement in BASELINE.split(";"):
            if statement.strip():
                db.execute(statement)
        current = 1
    for migration in MIGRATIONS:
        if current < migration.to <= version:
            migration.apply(db)
            current = migration.to
    _set_version(db, current)


def create_or_upgrade(db: sqlite3.Connection) -> list[Migration]:
    """Bring the store to :data:`SCHEMA_VERSION` inside the caller's write transaction.
    Returns the migrations applied to an existing store (none for a new or current one);
    raises :class:`NewerStoreError` for a store from a later release, changing nothing."""
    current = stored_version(db)
    if current is not None and current > SCHEMA_VERSION:
        raise NewerStoreError(current)
    applied = [] if current is None else [m for m in MIGRATIONS if m.to > current]
    create_at_version(db, SCHEMA_VERSION)
    return applied
