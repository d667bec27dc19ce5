"""Store versions: older stores are migrated (every version, and a real one from 69473e3), newer
ones are refused with a message saying what to do, and the file is left as it was."""

from __future__ import annotations

import csv
import hashlib
import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from willitscale.errors import StoreError
from willitscale.results.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    create_at_version,
    stored_version,
)
from willitscale.results.store import Store

#: written by `willitscale bench` at main 69473e3 (tests/data/store-69473e3/README.md): run 1
#: collectives (8 rows), run 2 train (1 row), run 3 matmul (2 rows), one calibration of runs 1, 3
FIXTURE = Path(__file__).parents[1] / "data" / "store-69473e3" / "results.sqlite"


def _readonly(path: Path) -> sqlite3.Connection:
    """The committed fixture opened without writing next to it: a WAL-mode database opened
    even read-only creates -shm/-wal files, unless SQLite is told the file never changes."""
    return sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)


def _raw(path: Path, sql: str) -> list[tuple]:
    db = _readonly(path)
    try:
        return db.execute(sql).fetchall()
    finally:
        db.close()


def test_migrations_count_up_from_the_baseline_without_gaps():
    assert [m.to for m in MIGRATIONS] == list(range(2, SCHEMA_VERSION + 1))
    assert all(m.adds for m in MIGRATIONS)


def _store_at(path: Path, version: int) -> None:
    """A store of ``version`` holding one run and one row, written with version 1's columns
    (every later version keeps them: migrations only add)."""
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("BEGIN")
    create_at_version(db, version)
    db.execute("INSERT INTO runs (kind, started_at, finished_at, status, label, options, "
               "environment, host, pid) VALUES ('matmul', '2026-01-01T00:00:00+00:00', NULL, "
               "'complete', 'old', '{}', '{\"world_size\": 1}', 'h', 1)")
    db.execute("INSERT INTO rows (run_id, seq, data) VALUES (1, 0, '{\"m\": 64}')")
    db.execute("COMMIT")
    db.close()


@pytest.mark.parametrize("version", range(1, SCHEMA_VERSION))
def test_a_store_of_every_older_version_migrates_to_the_newest(tmp_path, version, capsys):
    path = tmp_path / "results.sqlite"
    _store_at(path, version)
    with Store(path) as store:
        run = store.run(1)
        assert (run.info.label, run.info.status, run.info.reason) == ("old", "complete", "")
        assert run.rows == ({"m": 64},)
        store.finish_run(1, "failed", reason="rank 1 was killed")  # a version-2 column
        assert store.run_info(1).reason == "rank 1 was killed"
        assert store.run_info(1).source == ""  # version 3: runs made before it were measured
        new = store.add_run(kind="matmul", started_at="2026-01-02T00:00:00+00:00",
                            finished_at=None, status="complete", label="", options={},
                            environment={}, host="h", pid=2, source="nccl-tests text a.log")
        assert store.run_from_source("nccl-tests text a.log") == new
    assert _raw(path, "SELECT value FROM meta WHERE key = 'schema_version'") == \
        [(str(SCHEMA_VERSION),)]
    assert f"migrated from schema version {version} to {SCHEMA_VERSION}" in capsys.readouterr().err
    with Store(path):  # once only
        pass
    assert "migrated" not in capsys.readouterr().err


def test_a_new_store_has_the_schema_a_migrated_one_has(tmp_path):
    with Store(tmp_path / "new.sqlite"):
        pass
    _store_at(tmp_path / "old.sqlite", 1)
    with Store(tmp_path / "old.sqlite"):
        pass
    schema = "SELECT type, name, sql FROM sqlite_master ORDER BY name"
    assert _raw(tmp_path / "new.sqlite", schema) == _raw(tmp_path / "old.sqlite", schema)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_newer_store_is_refused_and_left_unchanged(tmp_path, cli):
    home = tmp_path / "willitscale-home"  # the CLI's store (conftest)
    path = home / "results.sqlite"
    home.mkdir()
    _store_at(path, SCHEMA_VERSION)
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    db.commit()
    db.close()
    before = _digest(path)
    with pytest.raises(StoreError) as caught:
        Store(path)
    message = str(caught.value)
    assert str(path) in message and "schema version 99" in message
    assert f"up to {SCHEMA_VERSION}" in message and "pip install -U willitscale" in message
    for command in (["results", "list"], ["results", "export"], ["validate"]):
        code, out, err = cli(*command)
        assert code == 1 and "schema version 99" in err and "Traceback" not in err, command
    assert _digest(path) == before


@pytest.fixture
def fixture_home(tmp_path):
    """The 69473e3 store as the CLI's store (a copy: migrating changes the file)."""
    home = tmp_path / "willitscale-home"
    home.mkdir()
    shutil.copy(FIXTURE, home / "results.sqlite")
    return home / "results.sqlite"


def test_the_store_of_69473e3_is_migrated_and_read(fixture_home, cli):
    assert stored_version(_readonly(FIXTURE)) == 1
    raw = _raw(FIXTURE, "SELECT run_id, seq, data FROM rows ORDER BY run_id, seq")
    code, out, err = cli("results", "list", "--json")
    assert code == 0, err
    assert f"migrated from schema version 1 to {SCHEMA_VERSION}" in err
    listed = json.loads(out)
    assert [(r["id"], r["kind"], r["status"], r["rows"], r["label"]) for r in listed] == [
        (3, "matmul", "complete", 2, "fixture matmul"), (2, "train", "complete", 1, "fixture train"),
        (1, "collectives", "complete", 8, "fixture collectives")]
    code, out, err = cli("results", "show", "1", "--json")
    assert code == 0, err
    shown = json.loads(out)
    assert shown["environment"]["world_size"] == 2 and shown["environment"]["backend"] == "gloo"
    assert shown["results"] == [json.loads(d) for r, _, d in raw if r == 1]
    code, out, err = cli("results", "export", "--format", "csv")
    assert code == 0, err
    exported = list(csv.DictReader(io.StringIO(out)))
    assert [(int(r["run_id"]), r["kind"]) for r in exported] == [(r, k) for r, k in (
        [(1, "collectives")] * 8 + [(2, "train")] + [(3, "matmul")] * 2)]
    code, out, err = cli("results", "show", "2")  # the text view of a train run
    assert code == 0 and "gpt2-tiny" in out, err
    code, out, err = cli("validate", "--json")  # the stored calibration of runs 1 and 3
    assert code == 0, err
    report = json.loads(out)
    # every collective row of run 1 predicted; matmul run 3 fitted the peak (nothing to predict)
    assert [r["run_id"] for r in report["rows"]] == [1] * 8
    assert {s["run_id"] for s in report["skipped"]} == {2, 3}
    assert _raw(fixture_home, "SELECT value FROM meta WHERE key = 'schema_version'") == \
        [(str(SCHEMA_VERSION),)]
