"""Ctrl-C in the middle of a sweep keeps every finished row and marks the run interrupted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from willitscale.bench.ranks.launch import GRACE_S
from willitscale.results.store import Store

pytestmark = pytest.mark.distributed

#: 1 kB, 2 kB, ... 1 MB in steps of 1 kB: 1000 sizes, each a few milliseconds (it took ~25 s
#: in all on this 2-core machine), so the sweep is surely still running when the test
#: interrupts it after its first rows, and a Ctrl-C lands between small ops (a rank notices
#: it when the op in flight returns: nothing here takes long)
SWEEP = ["-b", "1kB", "-e", "1MB", "-i", "1kB", "-n", "10", "-w", "1"]
SIZES = 1000
#: after the signal: the ranks stop at their next op, rank 0 saves and prints; the launcher
#: kills ranks still running after GRACE_S and waits up to GRACE_S for rank 0's output.
#: 30 s more for three Python processes to exit on a loaded machine
STOP_TIMEOUT_S = 2 * GRACE_S + 30
#: starting three Python processes that import torch and rendezvous: a few seconds unloaded
START_TIMEOUT_S = 180


def _stored_rows(path) -> int:
    if not path.exists():
        return 0
    with Store(path) as store:
        runs = store.runs()
        return runs[0].rows if runs else 0


@pytest.mark.parametrize("how", ["ctrl_c", "kill_int", "kill_term"])
def test_sigint_mid_sweep_keeps_finished_rows(tmp_path, terminal, how):
    # ctrl_c: the terminal signals the launcher and every rank at once (each rank gets it twice:
    # from the terminal and forwarded by the launcher); kill_int: only the launcher is signalled
    # and must pass it on; kill_term: SIGTERM to the launcher alone (a scheduler, `timeout`),
    # which must not die alone and leave its ranks running
    env = {**os.environ, "WILLITSCALE_HOME": str(tmp_path)}
    proc = terminal([sys.executable, "-m", "willitscale.cli.main", "bench", "collectives",
                     "--nproc", "2", *SWEEP, "--json"], env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
    path = tmp_path / "results.sqlite"
    deadline = time.monotonic() + START_TIMEOUT_S
    while _stored_rows(path) < 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _stored_rows(path) >= 3, "the sweep did not start"
    if how == "ctrl_c":
        terminal.ctrl_c(proc)
    else:
        proc.send_signal(signal.SIGINT if how == "kill_int" else signal.SIGTERM)
    out, err = proc.communicate(timeout=STOP_TIMEOUT_S)
    assert proc.returncode == 130, err
    with pytest.raises(ProcessLookupError):  # no rank outlived the launcher
        os.killpg(proc.pid, 0)
    with Store(path) as store:
        run = store.run(store.latest_run_id())
    assert run.info.status == "interrupted", err  # rank 0 stopped itself: it was not killed
    assert 3 <= run.info.rows < SIZES  # stopped in the middle
    # the rows printed are the rows stored, every one complete and in sweep order
    assert [r["size_bytes"] for r in run.rows] == [1000 * (i + 1) for i in range(run.info.rows)]
    assert all(r["wrong"] == 0 for r in run.rows)
    assert [r["size_bytes"] for r in json.loads(out)] == [r["size_bytes"] for r in run.rows]
    assert f"interrupted: {run.info.rows} finished rows kept" in err
    assert "Traceback" not in err and "error" not in err.lower()
