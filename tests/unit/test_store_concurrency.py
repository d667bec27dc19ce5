"""The results store keeps every committed row: under concurrent writers and a killed writer."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

from willitscale.results.store import Store

WRITER = textwrap.dedent("""
    import sys, time
    from willitscale.results.store import Store
    path, rows, delay = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    with Store(path) as store:
        run = store.start_run("collectives", options={}, environment={"writer": "test"})
        for seq in range(rows):
            store.add_row(run, seq, {"seq": seq})
            print(run, seq, flush=True)      # reported only after the commit
            time.sleep(delay)
        store.finish_run(run, "complete")
""")


def _writer(path, rows: int, delay: float) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(rows), str(delay)],
                            stdout=subprocess.PIPE, text=True)


def test_round_trip_and_latest(tmp_path):
    with Store(tmp_path / "r.sqlite") as store:
        a = store.start_run("matmul", options={"iters": 3}, environment={"world_size": 1})
        store.add_row(a, 0, {"m": 1})
        store.finish_run(a, "complete")
        b = store.start_run("train", options={}, environment={})
        assert store.latest_run_id() == b
        assert store.latest_run_id(kind="matmul") == a
        run = store.run(a)
        assert run.info.status == "complete" and run.info.rows == 1
        assert dict(run.rows[0]) == {"m": 1} and run.info.options["iters"] == 3


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "r.sqlite"
    # 4 processes x 60 rows written at the same time: all 240 must be there, each run complete
    procs = [_writer(path, 60, 0.0) for _ in range(4)]
    for p in procs:
        p.communicate(timeout=120)
        assert p.returncode == 0
    with Store(path) as store:
        runs = store.runs()
        assert len(runs) == 4
        assert all(r.rows == 60 and r.status == "complete" for r in runs)
        assert sorted(row["seq"] for row in store.run(runs[0].id).rows) == list(range(60))
        assert store.integrity_ok()


def test_killed_writer_keeps_every_committed_row(tmp_path):
    path = tmp_path / "r.sqlite"
    killed = _writer(path, 10_000, 0.002)
    other = _writer(path, 50, 0.004)  # a second bench writing at the same time
    reported = []
    for line in killed.stdout:  # (ends early, and the test fails, if the writer dies)
        reported.append(line.split())
        if len(reported) == 40:
            break
    os.kill(killed.pid, signal.SIGKILL)
    killed.wait()
    other.communicate(timeout=120)
    assert len(reported) == 40, "the writer stopped by itself"
    run_id = int(reported[0][0])
    with Store(path) as store:
        run = store.run(run_id)
        # every row the writer reported (it reports after the commit) survived the SIGKILL
        assert run.info.rows >= len(reported)
        assert [r["seq"] for r in run.rows] == list(range(run.info.rows))
        assert run.info.status == "killed"  # still marked running, but its pid is gone
        (concurrent,) = [r for r in store.runs() if r.id != run_id]
        assert concurrent.rows == 50 and concurrent.status == "complete"
        assert store.integrity_ok()
        # and the store still takes writes
        new = store.start_run("matmul", options={}, environment={})
        store.add_row(new, 0, {"ok": True})
        assert store.run(new).info.rows == 1


def test_default_location_follows_willitscale_home(tmp_path, monkeypatch):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "h"))
    with Store() as store:
        assert store.path == tmp_path / "h" / "results.sqlite"
