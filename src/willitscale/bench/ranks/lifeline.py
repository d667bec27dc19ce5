"""Child processes that do not outlive their parent (the launcher's ranks, emulate's nodes).

A launcher killed with SIGKILL cannot stop its children; the kernel can. On Linux a child asks,
between fork and exec, to be sent a signal when its parent dies (``prctl(PR_SET_PDEATHSIG)``,
man 2 prctl; it survives the exec, and ``ip netns exec`` execs the node's command in place).
SIGTERM lets a rank stop as it does on Ctrl-C (finished rows kept, the run marked). Elsewhere,
and in case that stop hangs, a rank also watches its parent's pid from its heartbeat thread
(:class:`ParentWatch`): once the launcher is gone it sends itself SIGTERM, and SIGKILL
:data:`GRACE_S` later.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable

__all__ = ["die_with_parent", "ParentWatch", "LAUNCHER_PID_ENV", "GRACE_S"]

#: from <linux/prctl.h>
PR_SET_PDEATHSIG = 1
LAUNCHER_PID_ENV = "WILLITSCALE_LAUNCHER_PID"
GRACE_S = 10.0


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None


def die_with_parent(sig: int = signal.SIGTERM) -> Callable[[], None] | None:
    """A ``preexec_fn`` for :class:`subprocess.Popen`: the child is sent ``sig`` when this
    process dies. ``None`` where the kernel cannot do it (not Linux). Resolved here, in the
    parent, so the child runs no import or library lookup between fork and exec."""
    prctl = _prctl()
    if prctl is None:
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
        if os.getppid() != parent:  # the parent died before the request: act on it now
            os.kill(os.getpid(), sig)

    return preexec


class ParentWatch:
    """Called about once a second (from the heartbeat thread): when the launcher that started
    this rank is gone, stop -- SIGTERM first, SIGKILL after :data:`GRACE_S`."""

    def __init__(self, launcher_pid: int):
        self.launcher_pid = launcher_pid
        self._orphaned_at: float | None = None

    @classmethod
    def from_env(cls) -> ParentWatch | None:
        raw = os.environ.get(LAUNCHER_PID_ENV, "")
        return cls(int(raw)) if raw.isdigit() else None

    def __call__(self) -> None:
        if os.getppid() == self.launcher_pid:
            return
        now = time.monotonic()
        if self._orphaned_at is None:
            self._orphaned_at = now
            os.kill(os.getpid(), signal.SIGTERM)
        elif now - self._orphaned_at > GRACE_S:
            os.kill(os.getpid(), signal.SIGKILL)
