"""Faults in an emulated cluster: a rank dying on another node stops the whole run within
seconds, named; the nodes' commands die with a killed `emulate`, and its namespaces are
removed by the next run, which says so."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from willitscale.bench.emulate import PREFIX, cleanup_stale

pytestmark = [pytest.mark.emulate, pytest.mark.usefixtures("emulation_available")]

START_TIMEOUT_S = 180
EXIT_WITHIN_S = 10.0


def _namespaces(pid: int) -> list[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return [line.split()[0] for line in out.splitlines()
            if line.strip() and line.startswith(f"{PREFIX}{pid}-")]


def _pids_in(namespaces: list[str]) -> list[int]:
    return [int(p) for ns in namespaces for p in subprocess.run(
        ["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split()]


def _rows(path: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return db.execute("SELECT COUNT(*) FROM rows").fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def _rank_pid(rank: int, namespaces: list[str]) -> int | None:
    for pid in _pids_in(namespaces):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env and b"WILLITSCALE_PROGRESS_FILE" in b" ".join(env):
            return pid
    return None


def test_a_rank_killed_on_another_node_stops_the_run(terminal, tmp_path):
    pytest.importorskip("torch")
    env = {**os.environ, "WILLITSCALE_HOME": str(tmp_path)}
    proc = terminal([sys.executable, "-m", "willitscale.cli.main", "emulate", "--nodes", "2",
                     "--uplink", "1Gbit", "--", "willitscale", "bench", "collectives", "-b",
                     "1kB", "-e", "1MB", "-i", "1kB", "-n", "5", "-w", "1"],
                    env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    path = tmp_path / "results.sqlite"
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while _rows(path) < 3 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _rows(path) >= 3, "the sweep did not start"
        victim = _rank_pid(1, _namespaces(proc.pid))
        assert victim is not None
        os.kill(victim, signal.SIGKILL)
        fault = time.monotonic()
        _, err = proc.communicate(timeout=60)
        took = time.monotonic() - fault
        assert proc.returncode == 1, err
        assert took < EXIT_WITHIN_S, (took, err)
        assert f"rank 1 (node 1, host {os.uname().nodename}, pid {victim}) was killed by SIGKILL" in err
        assert "node 1's command exited with status 1" in err and "Traceback" not in err
        assert _namespaces(proc.pid) == []
        db = sqlite3.connect(path)
        status, reason = db.execute("SELECT status, reason FROM runs").fetchone()
        assert status == "failed" and "rank 1" in reason and _rows(path) >= 3
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        cleanup_stale()


def test_node_commands_die_with_a_killed_emulate(terminal):
    proc = terminal([sys.executable, "-m", "willitscale.cli.main", "emulate", "--nodes", "2",
                     "--uplink", "1Gbit", "--", "sleep", "60"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while len(_pids_in(_namespaces(proc.pid))) < 2:
            assert proc.poll() is None and time.monotonic() < deadline, "the nodes did not start"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        fault = time.monotonic()
        proc.wait()
        left = _namespaces(proc.pid)
        while _pids_in(left) and time.monotonic() - fault < 30:
            time.sleep(0.05)
        assert _pids_in(left) == [] and time.monotonic() - fault < EXIT_WITHIN_S
        assert len(left) == 3  # nothing runs in them, but a killed process cannot delete them
        # the next run removes them, and says so
        out = subprocess.run([sys.executable, "-m", "willitscale.cli.main", "emulate", "--nodes",
                              "1", "--uplink", "1Gbit", "--", "true"], capture_output=True,
                             text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert f"left by emulate run(s) that were killed (pid {proc.pid})" in out.stderr
        assert _namespaces(proc.pid) == []
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        cleanup_stale()
