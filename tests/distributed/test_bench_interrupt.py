"""Ctrl-C in the middle of a sweep keeps every finished row and marks the run interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from willitscale.bench.store import Store

pytestmark = pytest.mark.distributed


def test_sigint_mid_sweep_keeps_finished_rows(tmp_path):
    env = {**os.environ, "WILLITSCALE_HOME": str(tmp_path)}
    # a sweep long enough to interrupt: 1 kB .. 1 GB, 50 iterations per size
    proc = subprocess.Popen([sys.executable, "-m", "willitscale.cli.main", "bench", "collectives",
                             "--nproc", "2", "-b", "1kB", "-e", "1GB", "-f", "2", "-n", "50",
                             "-w", "1", "--json"], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    rows = 0
    while rows < 3 and time.monotonic() < deadline:
        time.sleep(0.2)
        if (tmp_path / "results.sqlite").exists():
            with Store(tmp_path / "results.sqlite") as store:
                runs = store.runs()
                rows = runs[0].rows if runs else 0
    assert rows >= 3, "the sweep did not start"
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    with Store(tmp_path / "results.sqlite") as store:
        run = store.run(store.latest_run_id())
    assert run.info.status == "interrupted"
    assert run.info.rows >= 3
    # the rows printed are the rows stored, every one complete
    assert [r["size_bytes"] for r in run.rows] == [1000 * 2**i for i in range(run.info.rows)]
    assert all(r["wrong"] == 0 for r in run.rows)
    assert [r["size_bytes"] for r in json.loads(out)] == [r["size_bytes"] for r in run.rows]
    assert "interrupted" in err
