"""`results export` files read back by `results import`: the same runs and rows, and a bad
record is reported by file and line while the others are imported."""

from __future__ import annotations

import csv
import io
import json
import shutil
from pathlib import Path

import pytest

from willitscale.results.store import Store

FIXTURE = Path(__file__).parents[1] / "data" / "store-69473e3" / "results.sqlite"


@pytest.fixture
def source(tmp_path):
    """A copy of the store main at 69473e3 wrote (real rows of all three kinds)."""
    path = tmp_path / "source" / "results.sqlite"
    path.parent.mkdir()
    shutil.copy(FIXTURE, path)
    with Store(path) as store:  # migrated once here, so the CLI below prints no note
        store.finish_run(2, "failed", reason="rank 1 (host a, pid 7) was killed by SIGKILL")
    return path


def _export(cli, monkeypatch, store: Path, fmt: str, out: Path) -> None:
    monkeypatch.setenv("WILLITSCALE_HOME", str(store.parent))
    code, _, err = cli("results", "export", "--format", fmt, "-o", str(out))
    assert code == 0, err


def _runs(path: Path) -> list:
    with Store(path) as store:
        return [store.run(i.id) for i in reversed(store.runs())]


def _same(run):
    """Everything that must survive the trip (ids are new ones)."""
    info = run.info.to_json()
    del info["id"]
    return info, [dict(r) for r in run.rows]


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_export_then_import_gives_the_same_runs(cli, monkeypatch, tmp_path, source, fmt):
    exported = tmp_path / f"runs.{fmt}"
    _export(cli, monkeypatch, source, fmt, exported)
    fresh = tmp_path / "fresh"
    monkeypatch.setenv("WILLITSCALE_HOME", str(fresh))
    code, out, err = cli("results", "import", str(exported), "--json")
    assert code == 0, err
    assert [(r["source_id"], r["id"]) for r in json.loads(out)] == [(1, 1), (2, 2), (3, 3)]
    before, after = _runs(source), _runs(fresh / "results.sqlite")
    assert [_same(r) for r in after] == [_same(r) for r in before]
    assert after[1].info.status == "failed" and "SIGKILL" in after[1].info.reason
    # again: nothing is copied twice
    code, out, err = cli("results", "import", str(exported), "--json")
    assert code == 0 and [r["skipped"] for r in json.loads(out)] == ["already here"] * 3


def _rewrite_csv(path: Path, edit) -> list[dict]:
    rows = list(csv.DictReader(io.StringIO(path.read_text())))
    edit(rows)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=list(rows[0]), lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    path.write_text(buf.getvalue())
    return rows


def test_bad_csv_records_are_named_by_line_and_the_rest_imported(cli, monkeypatch, tmp_path,
                                                                 source):
    exported = tmp_path / "runs.csv"
    _export(cli, monkeypatch, source, "csv", exported)

    def edit(rows):  # run 1 is rows[0:8], run 2 rows[8], run 3 rows[9:11]; header: line 1
        rows[3]["size_bytes"] = "abc"  # line 5
        rows[5]["kind"] = "bogus"  # line 7
        rows[8]["run_pid"] = "12x"  # line 10: run 2's only row
        rows[10]["label"] = "other"  # line 12: not the label of run 3's first record

    _rewrite_csv(exported, edit)
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "fresh"))
    code, out, err = cli("results", "import", str(exported))
    assert code == 1, err
    lines = [line for line in err.splitlines() if line.startswith("not imported:")]
    assert [line.split(":")[2] for line in lines] == ["5", "7", "10", "12"], err
    assert f"{exported}:5: a collectives row is malformed" in err
    assert "kind = 'bogus'" in err and "run_pid = '12x'" in err
    assert "run 3's label differ from its first record" in err
    assert "4 record(s) not imported" in err
    with Store(tmp_path / "fresh" / "results.sqlite") as store:
        # run 1 lost two of its 8 rows, run 2 its only one, run 3 one of its two
        assert [(r.kind, r.rows) for r in reversed(store.runs())] == \
            [("collectives", 6), ("matmul", 1)]


def test_a_json_record_that_does_not_parse_loses_only_itself(cli, monkeypatch, tmp_path, source):
    exported = tmp_path / "runs.json"
    _export(cli, monkeypatch, source, "json", exported)
    text = exported.read_text()
    starts = [i for i in range(len(text)) if text.startswith("\n  {", i)]
    cut = starts[2] + len("\n  {")  # the third record: its first key's quote removed
    broken = text[:cut] + text[cut:].replace('"run_id"', "run_id", 1)
    exported.write_text(broken)
    line = broken.count("\n", 0, cut) + 2  # the line after the brace holds the damage
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "fresh"))
    code, _, err = cli("results", "import", str(exported))
    assert code == 1 and f"{exported}:{line}: not valid JSON" in err, err
    with Store(tmp_path / "fresh" / "results.sqlite") as store:
        assert [r.rows for r in reversed(store.runs())] == [7, 1, 2]


def test_an_export_without_run_fields_says_to_export_again(cli, tmp_path):
    old = tmp_path / "old.csv"  # the columns exports had at 69473e3
    old.write_text("run_id,kind,started_at,label,m,n,k,type,device,time_us\n"
                   "3,matmul,2026-11-24T19:42:20+00:00,,64,64,64,float32,cpu,5.0\n")
    code, _, err = cli("results", "import", str(old))
    assert code == 2 and "old.csv" in err and "export it again" in err
    assert "Traceback" not in err


def test_importing_an_older_store_leaves_it_as_it_was(cli, tmp_path):
    import hashlib
    import sqlite3

    old = tmp_path / "job" / "results.sqlite"
    old.parent.mkdir()
    shutil.copy(FIXTURE, old)
    before = hashlib.sha256(old.read_bytes()).hexdigest()
    code, out, err = cli("results", "import", str(old), "--json")
    assert code == 0, err
    assert [r["id"] for r in json.loads(out)] == [1, 2, 3]
    assert hashlib.sha256(old.read_bytes()).hexdigest() == before  # not migrated in place
    version = sqlite3.connect(old).execute(
        "SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    assert version == ("1",)
    with Store() as store:
        assert [r.rows for r in reversed(store.runs())] == [8, 1, 2]
