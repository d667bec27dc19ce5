"""`results import` gathers runs from other stores: rows intact, new ids, never twice."""

from __future__ import annotations

import json

from willitscale.results.store import Store


def _store_with_runs(path, rows_per_run, status="complete"):
    with Store(path) as store:
        ids = []
        for n in rows_per_run:
            run = store.start_run("collectives", options={"n": n}, environment={"host": "a"},
                                  label=f"{n} rows")
            for seq in range(n):
                store.add_row(run, seq, {"seq": seq, "size_bytes": 1000 * (seq + 1)})
            store.finish_run(run, status)
            ids.append(run)
        return ids


def test_runs_of_two_job_stores_land_in_one(cli, tmp_path):
    _store_with_runs(tmp_path / "here.sqlite", [1])  # not the CLI's store: a decoy
    _store_with_runs(tmp_path / "job1" / "results.sqlite", [2, 3])
    _store_with_runs(tmp_path / "job2" / "results.sqlite", [4], status="interrupted")
    code, out, err = cli("results", "import", str(tmp_path / "job1"),
                         str(tmp_path / "job2" / "results.sqlite"), "--json")
    assert code == 0, err
    records = json.loads(out)
    # the CLI's store (WILLITSCALE_HOME) was empty: the three runs become 1, 2, 3 in order
    assert [(r["source_id"], r["id"], r["skipped"]) for r in records] == \
        [(1, 1, None), (2, 2, None), (1, 3, None)]
    with Store() as store:
        runs = {r.id: r for r in store.runs()}
        assert [runs[i].rows for i in (1, 2, 3)] == [2, 3, 4]
        assert runs[3].status == "interrupted" and runs[2].label == "3 rows"
        assert [r["size_bytes"] for r in store.run(2).rows] == [1000, 2000, 3000]
    # again: every run is already here, nothing is copied twice
    code, out, _ = cli("results", "import", str(tmp_path / "job1"), "--json")
    assert [r["skipped"] for r in json.loads(out)] == ["already here", "already here"]
    with Store() as store:
        assert len(store.runs()) == 3


def test_a_run_still_running_waits(cli, tmp_path):
    path = tmp_path / "job" / "results.sqlite"
    with Store(path) as store:
        store.start_run("train", options={}, environment={})  # this process: still alive
    code, out, err = cli("results", "import", str(path), "--json")
    assert code == 0, err
    (record,) = json.loads(out)
    assert record["id"] is None and record["skipped"].startswith("still running")


def test_bad_sources_are_named(cli, tmp_path):
    code, _, err = cli("results", "import", str(tmp_path / "nowhere"))
    assert code != 0 and "nowhere" in err and "results.sqlite" in err
    assert "Traceback" not in err
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database")
    code, _, err = cli("results", "import", str(junk))
    assert code != 0 and "junk.sqlite" in err and "Traceback" not in err
    with Store() as store:  # the CLI's own store cannot import itself
        path = store.path
    code, _, err = cli("results", "import", str(path))
    assert code != 0 and "another results store" in err
