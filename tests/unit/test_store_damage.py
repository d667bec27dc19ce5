"""A damaged store: every command says so, names the file and the way out, and `results
salvage` copies what is still readable into a fresh store."""

from __future__ import annotations

import json
import sqlite3

import pytest

from willitscale.collectives.ops import Op
from willitscale.errors import StoreError
from willitscale.results import store as store_module
from willitscale.results.records import CollectiveRow
from willitscale.results.store import Store, store_path

RUNS, ROWS = 3, 150
PAGE = 4096  # SQLite's default page size (checked below)


def _filled_store() -> int:
    """RUNS runs of ROWS real rows in the CLI's store; returns its page count."""
    with Store() as store:
        for r in range(RUNS):
            run = store.start_run("collectives", options={}, label=f"run {r}", environment={
                "world_size": 2, "nodes": 1, "ranks_per_node": 2, "backend": "gloo",
                "devices": ["cpu"]})
            for i in range(ROWS):
                size = 1000 * (i + 1)
                store.add_row(run, i, CollectiveRow(
                    op=Op.ALL_REDUCE, size_bytes=size, count=size // 4, dtype="float32",
                    redop="sum", root=-1, in_place=False, ranks=2, time=1e-3, wrong=0).to_json())
            store.finish_run(run, "complete")
    db = sqlite3.connect(store_path())
    try:
        assert db.execute("PRAGMA page_size").fetchone()[0] == PAGE
        return db.execute("PRAGMA page_count").fetchone()[0]
    finally:
        db.close()


def _damage(page: int) -> None:
    """Overwrite one page (1-based) with 0xff bytes, as a failing disk or a torn copy might."""
    with open(store_path(), "r+b") as f:
        f.seek((page - 1) * PAGE)
        f.write(b"\xff" * PAGE)


@pytest.fixture
def damaged_store():
    pages = _filled_store()
    # the rows' leaves fill most of the file: a page in the middle holds rows of run 2
    _damage(pages // 2)


@pytest.mark.parametrize("command", [("results", "list"), ("results", "export"),
                                     ("results", "show", "1"), ("validate",)])
def test_every_command_says_the_store_is_damaged_and_how_to_recover(cli, damaged_store, command):
    code, out, err = cli(*command)
    assert code == 1, (out, err)
    assert f"results store {store_path()} is damaged" in err
    assert "`willitscale results salvage`" in err and ".recover" in err
    assert "Traceback" not in err and "internal error" not in err


def test_damage_past_the_quick_check_size_is_caught_when_read(cli, damaged_store, monkeypatch):
    monkeypatch.setattr(store_module, "QUICK_CHECK_MAX_BYTES", 0)  # no check on open
    code, _, err = cli("results", "export")
    assert code == 1 and "is damaged (database disk image is malformed" in err, err


def test_salvage_keeps_the_damaged_file_and_copies_what_reads(cli, damaged_store):
    damaged_bytes = store_path().read_bytes()
    code, out, err = cli("results", "salvage", "--json")
    assert code == 0, err
    report = json.loads(out)
    kept = [p for p in store_path().parent.iterdir() if p.name.startswith("results.damaged-")]
    assert [p.read_bytes() for p in kept] == [damaged_bytes]  # moved aside, untouched
    copied = sum(r["rows"] for r in report["runs"])
    assert 0 < copied < RUNS * ROWS and report["lost_rows"] == RUNS * ROWS - copied
    assert [r["id"] for r in report["runs"]] == [1, 2, 3]
    code, out, err = cli("results", "list", "--json")  # the fresh store reads
    assert code == 0, err
    assert sum(r["rows"] for r in json.loads(out)) == copied
    with Store() as store:
        assert store.integrity_ok()


def test_a_full_disk_says_so_and_keeps_the_rows_before(tmp_path):
    path = tmp_path / "results.sqlite"
    with Store(path) as store:
        run = store.start_run("matmul", options={}, environment={})
        store.add_row(run, 0, {"m": 1})
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL on the next page
        with pytest.raises(StoreError) as caught:
            for seq in range(1, 1000):
                store.add_row(run, seq, {"m": seq, "pad": "x" * 500})
        assert "database or disk is full while storing row" in str(caught.value)
        assert "Every row committed before is kept" in str(caught.value)
        kept = store.run(run).info.rows
    with Store(path) as store:
        assert store.run(run).info.rows == kept >= 1
