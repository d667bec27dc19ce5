"""willitscale sweep on a local Ray head that the test starts (the optional 'ray' extra).

The head is the test's own: its own --temp-dir, an explicit address on 127.0.0.1, --num-cpus 2,
no dashboard, RAY_USAGE_STATS_ENABLED=0; it runs in the foreground (--block) in its own process
group and is stopped by that id, SIGTERM first and SIGKILL for whatever is left (Ray processes
can ignore SIGTERM for seconds). A stale /tmp/ray session is never reused: the temp dir is new.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray", reason="the optional 'ray' extra is not installed")

from willitscale.sweep.grid import parse_grid  # noqa: E402
from willitscale.sweep.output import open_rows  # noqa: E402
from willitscale.sweep.runner import columns_of, run_sweep  # noqa: E402

pytestmark = pytest.mark.slow

#: 2 oversubscriptions x 3 routings x 4 sizes x 3 collectives x 3 seeds = 216 points (>= 200)
GRID = {
    "kind": "fabric", "seeds": "1-3",
    "fixed": {"topology": "fat-tree", "k": 4, "gpus_per_node": 4},
    "grid": {"oversubscription": [1, 2], "routing": ["ecmp", "spray", "adaptive"],
             "size": ["1MB", "4MB", "16MB", "64MB"], "collective": ["all_reduce", "all_gather", "reduce_scatter"]},
}


#: the process group of the running head (for the test that kills one of its workers)
_HEAD_GROUP: list[int] = []


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def ray_head(monkeypatch):
    """The address of a Ray head started for this test, stopped by its process group id after."""
    monkeypatch.setenv("RAY_USAGE_STATS_ENABLED", "0")
    temp = tempfile.mkdtemp(prefix="wis-ray-", dir="/tmp")  # short: Ray's socket paths have a limit
    port = _free_port()
    ray_cli = Path(sys.executable).with_name("ray")
    argv = [str(ray_cli), "start", "--head", "--block", f"--port={port}", "--node-ip-address=127.0.0.1",
            "--num-cpus=2", f"--temp-dir={temp}", "--include-dashboard=false", "--disable-usage-stats",
            f"--dashboard-agent-listen-port={_free_port()}"]
    head = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, start_new_session=True,
                            env={**os.environ, "RAY_USAGE_STATS_ENABLED": "0"})
    address = f"127.0.0.1:{port}"
    _HEAD_GROUP[:] = [head.pid]  # start_new_session: the head's process group id is its pid
    try:
        _wait_for_head(head, port)
        yield address
    finally:
        if ray.is_initialized():
            ray.shutdown()
        _stop(head)
        shutil.rmtree(temp, ignore_errors=True)


def _wait_for_head(head: subprocess.Popen, port: int, timeout: float = 90.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if head.poll() is not None:
            pytest.fail(f"ray start exited {head.returncode}: {head.stderr.read().decode()[-2000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.5)
    pytest.fail(f"the Ray head did not listen on port {port} within {timeout:.0f} s")


def _stop(head: subprocess.Popen) -> None:
    """SIGTERM to the head's process group, then SIGKILL to whatever of it is left."""
    group = head.pid  # start_new_session: the group id is the head's process id
    try:
        os.killpg(group, signal.SIGTERM)
        head.wait(timeout=15)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(group, signal.SIGKILL)
    except ProcessLookupError:
        pass
    head.wait(timeout=15)


def test_ray_head_gives_the_rows_of_a_process_pool(tmp_path, ray_head):
    grid = parse_grid(GRID)
    assert len(grid.points) == 216
    pool_out, ray_out = tmp_path / "pool.csv", tmp_path / "ray.csv"
    pool = run_sweep(grid, open_rows(pool_out, columns_of(grid)), workers=2)
    on_ray = run_sweep(grid, open_rows(ray_out, columns_of(grid)), ray_address=ray_head)
    assert (pool.ran, on_ray.ran, on_ray.lost, on_ray.errors) == (216, 216, 0, 0)
    assert ray_out.read_bytes() == pool_out.read_bytes()


def _busy_workers(group: int) -> list[int]:
    """Process ids of the head's Ray workers running a sweep task (from /proc: no psutil)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            title = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        pgid = int(stat.rsplit(")", 1)[1].split()[3])  # fields after "(comm)": state ppid pgrp
        if pgid == group and "_rows_of_batch" in title:
            found.append(int(entry.name))
    return found


def test_a_lost_ray_worker_loses_no_point(tmp_path, ray_head, monkeypatch):
    import threading

    from willitscale.sweep import runner

    # 8 tasks of 8 points of a 32-server fabric (a quarter of a second each on this machine): one
    # worker is killed while it runs its task; Ray runs the task again and the file is the
    # in-process one. The killer strikes as soon as it sees a busy worker (a task can end within
    # a few hundred milliseconds), and a worker that ended first is not counted: it looks again.
    monkeypatch.setattr(runner, "RAY_BATCH", 8)
    grid = parse_grid({"kind": "fabric", "seeds": "1-32", "fixed": {"nodes": 32, "size": "64MB"},
                       "grid": {"routing": ["ecmp", "adaptive"]}})
    here, on_ray = tmp_path / "here.csv", tmp_path / "ray.csv"
    run_sweep(grid, open_rows(here, columns_of(grid)))
    killed: list[int] = []

    def kill_one_busy_worker():
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            for pid in _busy_workers(_HEAD_GROUP[0]):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    continue  # its task ended between the look and the kill
                killed.append(pid)
                break
            time.sleep(0.01)

    killer = threading.Thread(target=kill_one_busy_worker, daemon=True)
    killer.start()
    summary = run_sweep(grid, open_rows(on_ray, columns_of(grid)), ray_address=ray_head)
    killer.join(timeout=5)
    assert killed, "no busy Ray worker was seen to kill"
    assert (summary.ran, summary.lost) == (64, 0)  # 2 routings x 32 seeds
    assert on_ray.read_bytes() == here.read_bytes()
