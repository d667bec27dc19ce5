"""The launcher's judgement of its ranks: heartbeat files, who is to blame for a hang, how a
rank's end is told, and children that die with their parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import pytest

from willitscale.bench.ranks import heartbeat
from willitscale.bench.ranks.heartbeat import Heartbeat, Reading
from willitscale.bench.ranks.watch import (
    DEFAULT_TIMEOUT_S,
    STARTUP_S,
    TIMEOUT_ENV,
    RankWatch,
    exit_text,
    failure_message,
    hang,
    timeout_s,
)
from willitscale.errors import ConfigError

T = 20.0  # the timeout of these cases


def _rank(rank: int, *, ticks: int | None, waits: bool = True, doing: str = "all_reduce 8 B",
          tick_age: float = 0.0, beat_age: float = 0.0, stopped: bool = False,
          now: float = 1000.0, started: float = 0.0) -> RankWatch:
    w = RankWatch(rank=rank, where=f"host h, pid {100 + rank}", started=started)
    if ticks is not None:
        w.reading = Reading(beats=1, ticks=ticks, run_id=None, waits=waits, doing=doing)
        w.tick_at, w.beat_at = now - tick_age, now - beat_age
    w.stopped = stopped
    return w


def test_a_hang_needs_every_running_rank_stale():
    now = 1000.0
    busy = _rank(0, ticks=50, tick_age=T + 1)  # waits, no progress: stale
    fine = _rank(1, ticks=49, tick_age=1)  # moved a second ago
    assert hang([busy, fine], now, T) is None
    local = _rank(1, ticks=49, waits=False, tick_age=600, beat_age=1)  # long own work, alive
    assert hang([busy, local], now, T) is None
    done = _rank(1, ticks=80, tick_age=600)
    done.exit = 0  # finished ranks do not count
    assert hang([busy, done], now, T) is not None


def test_a_stopped_rank_is_blamed_and_the_waiting_one_named():
    now = 1000.0
    waiting = _rank(0, ticks=50, tick_age=T + 0.5, doing="all_reduce 8,000 B: timed ops")
    stopped = _rank(1, ticks=49, tick_age=T + 0.6, beat_age=T + 0.6, stopped=True,
                    doing="all_reduce 8,000 B: timed ops")
    blamed, message = hang([waiting, stopped], now, T)
    assert blamed == [stopped]
    assert message.startswith("rank 1 (host h, pid 101) made no progress for 21 s: it is "
                              "stopped (SIGSTOP")
    assert "Waiting for it: rank 0 in all_reduce 8,000 B: timed ops" in message
    assert f"Stopped after 20 s without progress (--timeout or {TIMEOUT_ENV}" in message


def test_without_a_stopped_rank_the_one_behind_is_blamed_else_all():
    now = 1000.0
    ahead = _rank(0, ticks=51, tick_age=T + 1)
    behind = _rank(1, ticks=50, tick_age=T + 1, doing="barrier")
    blamed, message = hang([ahead, behind], now, T)
    assert blamed == [behind] and "it is behind its peers" in message
    level = _rank(1, ticks=51, tick_age=T + 1)
    blamed, message = hang([ahead, level], now, T)
    assert blamed == [ahead, level] and "every rank is stuck at the same point" in message


def test_a_rank_that_never_reports_gets_the_startup_allowance():
    # reported nothing since it was spawned: not stuck before max(timeout, STARTUP_S)
    silent = _rank(1, ticks=None, started=0.0)
    waiting = _rank(0, ticks=5, tick_age=T + 1, now=STARTUP_S - 1)
    assert hang([waiting, silent], STARTUP_S - 1, T) is None
    waiting = _rank(0, ticks=5, tick_age=T + 1, now=STARTUP_S + 1)
    blamed, message = hang([waiting, silent], STARTUP_S + 1, T)
    assert blamed == [silent] and "never reported after starting" in message


def test_how_a_rank_ended_is_said_plainly():
    assert exit_text(-signal.SIGKILL).startswith("was killed by SIGKILL (signal 9): it could "
                                                 "print nothing")
    assert exit_text(-signal.SIGSEGV).startswith("crashed (SIGSEGV, signal 11)")
    assert exit_text(-signal.SIGTERM) == "was killed by SIGTERM (signal 15)"
    assert exit_text(1) == "exited with status 1 (its error, if it printed one, is above)"
    assert exit_text(1, here=False) == "exited with status 1"
    w = _rank(1, ticks=3, doing="train gpt2-tiny step: backward")
    w.exit = -9
    assert failure_message(w, here=False).startswith("rank 1 (host h, pid 101) was killed by")
    assert failure_message(w).endswith("it was in: train gpt2-tiny step: backward")


def test_the_timeout_comes_from_the_flag_then_the_environment():
    assert timeout_s(None, {}) == DEFAULT_TIMEOUT_S == 300
    assert timeout_s(None, {TIMEOUT_ENV: "45"}) == 45
    assert timeout_s(20, {TIMEOUT_ENV: "45"}) == 20
    with pytest.raises(ConfigError, match="--timeout"):
        timeout_s(0, {})
    with pytest.raises(ConfigError, match=TIMEOUT_ENV):
        timeout_s(None, {TIMEOUT_ENV: "soon"})


def test_a_heartbeat_file_reads_back(tmp_path, monkeypatch):
    path = tmp_path / "rank0.heartbeat"
    path.touch()
    assert heartbeat.read(path) is None  # the rank has not written yet
    monkeypatch.setattr(heartbeat, "BEAT_S", 0.01)
    beat = Heartbeat(path)
    try:
        beat.enter("all_reduce 65,536 B out-of-place: timed ops")
        for _ in range(5):
            beat.tick()
        beat.set_run(7)
        first = heartbeat.read(path)
        # starting (1 tick) + enter (1) + 5 ticks
        assert (first.ticks, first.run_id, first.waits) == (7, 7, True)
        assert first.doing == "all_reduce 65,536 B out-of-place: timed ops"
        beat.enter("printing the results", waits=False)
        time.sleep(0.1)
        later = heartbeat.read(path)
        assert later.beats > first.beats and not later.waits and later.ticks == 8
    finally:
        beat.close()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_a_child_dies_with_its_parent_even_one_killed_with_sigkill(tmp_path):
    # a parent that starts `sleep 60` with die_with_parent(), prints its pid, and waits
    script = ("import subprocess, sys, time\n"
              "from willitscale.bench.ranks.lifeline import die_with_parent\n"
              "child = subprocess.Popen(['sleep', '60'], preexec_fn=die_with_parent())\n"
              "print(child.pid, flush=True)\n"
              "time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    child = int(parent.stdout.readline())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        try:  # the child is re-parented and reaped by init once dead
            state = open(f"/proc/{child}/stat").read().split()[2]
        except FileNotFoundError:
            break
        if state == "Z":
            break
        time.sleep(0.02)
    else:
        os.kill(child, signal.SIGKILL)
        pytest.fail("the child outlived its parent")


def test_a_collective_broken_by_a_lost_peer_is_reported_as_such():
    # the worker's message when no stop signal follows a failed collective (another node's
    # rank died; torchrun): what this rank was doing, never an internal error
    from types import SimpleNamespace

    from willitscale.bench.ranks.worker import _lost_peers

    dist_error = type("DistBackendError", (RuntimeError,), {})
    ctx = SimpleNamespace(rank=0, torch=SimpleNamespace(distributed=SimpleNamespace(
        DistError=dist_error)))
    lost = _lost_peers(dist_error("[../gloo/transport/tcp/pair.cc:534] Connection closed by "
                                  "peer [10.213.0.2]:5312\nmore"), ctx, "all_reduce 8 B: timed ops")
    assert str(lost) == ("rank 0 lost contact with its peers while in all_reduce 8 B: timed ops "
                         "(DistBackendError: [../gloo/transport/tcp/pair.cc:534] Connection "
                         "closed by peer [10.213.0.2]:5312): another rank stopped, died or hangs; "
                         "its launcher or torchrun names it")
    assert _lost_peers(RuntimeError("Connection reset by peer"), ctx, "x") is not None
    assert _lost_peers(ValueError("a bug of ours"), ctx, "x") is None  # shown as it is
