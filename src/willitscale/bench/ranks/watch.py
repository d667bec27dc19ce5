"""Watching a node's ranks: which one failed or hung, and how to say it (no I/O here).

The launcher polls every rank (never stopping at the first one still running) and reads each
rank's heartbeat file (:mod:`willitscale.bench.ranks.heartbeat`). A rank is *stale* when, for the
timeout, its progress counter has not moved while it waits on its peers, or its heartbeat has
not moved while it works alone (starting up, storing, plotting), or it has not reported at all
since it was started (:data:`STARTUP_S` at least: importing torch on a busy machine is slow).
A rank stuck in a collective makes every peer stuck too, so the job is declared hung when
every rank still running is stale; the rank to blame is one that is stopped or frozen, else
one that is behind the others, else all of them (a collective wedged everywhere).
"""

from __future__ import annotations

import os
import signal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from willitscale.bench.ranks.heartbeat import Reading
from willitscale.errors import ConfigError

__all__ = ["RankWatch", "exit_text", "failure_message", "hang", "timeout_s", "TIMEOUT_ENV",
           "DEFAULT_TIMEOUT_S", "STARTUP_S"]

TIMEOUT_ENV = "WILLITSCALE_TIMEOUT_S"
#: minutes, not torch's half hour: a healthy rank moves at least once per op, and the slowest
#: op worth timing (a 1 GB all-reduce over a 200 Mbit/s emulated link: 2 x 1e9 / 25e6 B/s =
#: 80 s) fits ~4 times; raise it for larger messages on slower links
DEFAULT_TIMEOUT_S = 300.0
#: a rank that has not reported since it started: Python plus the CLI plus torch on a loaded
#: 2-core machine took up to ~30 s here; 4x that before calling it stuck
STARTUP_S = 120.0


def timeout_s(flag: float | None, env: Mapping[str, str] = os.environ) -> float:
    """``--timeout``, else ``$WILLITSCALE_TIMEOUT_S``, else :data:`DEFAULT_TIMEOUT_S`."""
    if flag is not None:
        value, where = flag, "--timeout"
    elif env.get(TIMEOUT_ENV):
        where = TIMEOUT_ENV
        try:
            value = float(env[TIMEOUT_ENV])
        except ValueError:
            raise ConfigError(TIMEOUT_ENV, env[TIMEOUT_ENV], "a number of seconds") from None
    else:
        return DEFAULT_TIMEOUT_S
    if not 1 <= value <= 7 * 86400:
        raise ConfigError(where, value, "seconds without progress before a rank counts as "
                                        "stuck, from 1 to 604800 (a week)")
    return float(value)


@dataclass(slots=True, kw_only=True)
class RankWatch:
    """What the launcher knows of one of its ranks."""

    rank: int
    where: str  #: "host vm, pid 1234" (or "node 1, host vm, pid 1234")
    started: float  #: monotonic seconds when it was spawned
    exit: int | None = None  #: Popen.returncode once it ended
    stopped: bool = False  #: the kernel says it is stopped (SIGSTOP, a debugger)
    reading: Reading | None = None
    beat_at: float = 0.0  #: when ``beats`` last changed (or it was spawned)
    tick_at: float = 0.0  #: when ``ticks`` last changed

    def __post_init__(self) -> None:
        self.beat_at = self.tick_at = self.started

    def observe(self, reading: Reading | None, now: float) -> None:
        if reading is None:
            return
        if self.reading is None or reading.beats != self.reading.beats:
            self.beat_at = now
        if self.reading is None or reading.ticks != self.reading.ticks:
            self.tick_at = now
        self.reading = reading

    @property
    def doing(self) -> str:
        return self.reading.doing if self.reading else "starting (no heartbeat yet)"

    def idle(self, now: float) -> float:
        """Seconds without the sign of life that counts for what it is doing."""
        if self.reading is None:
            return now - self.started
        return now - (self.tick_at if self.reading.waits else self.beat_at)

    def stale(self, now: float, timeout: float) -> bool:
        if self.exit is not None:
            return False
        if self.stopped or (self.reading is not None and now - self.beat_at > timeout):
            return True
        limit = max(timeout, STARTUP_S) if self.reading is None else timeout
        return self.idle(now) > limit


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_text(code: int, *, here: bool = True) -> str:
    """How a rank ended, from its ``returncode`` (negative: the signal that killed it).
    ``here``: the text is printed where the rank's own error is, just above."""
    if code < 0:
        name = _signal_name(-code)
        if -code == signal.SIGKILL:
            return ("was killed by SIGKILL (signal 9): it could print nothing; something outside "
                    "willitscale killed it (a user, the job scheduler, or the kernel's "
                    "out-of-memory killer: see `dmesg`)")
        if -code in (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE, signal.SIGABRT):
            return f"crashed ({name}, signal {-code}): see its output above, if any"
        return f"was killed by {name} (signal {-code})"
    if code == 130:
        return "was interrupted (status 130)"
    return f"exited with status {code}" + (" (its error, if it printed one, is above)"
                                           if here else "")


def failure_message(watch: RankWatch, *, here: bool = True) -> str:
    assert watch.exit is not None and watch.exit != 0
    return (f"rank {watch.rank} ({watch.where}) {exit_text(watch.exit, here=here)}; it was in: "
            f"{watch.doing}")


def hang(watches: Sequence[RankWatch], now: float, timeout: float
         ) -> tuple[list[RankWatch], str] | None:
    """``(ranks to blame, message)`` when every rank still running is stale, else ``None``."""
    running = [w for w in watches if w.exit is None]
    if not running or not all(w.stale(now, timeout) for w in running):
        return None
    frozen = [w for w in running if w.stopped or (w.reading and now - w.beat_at > timeout)]
    silent = [w for w in running if w.reading is None]
    if frozen:
        blamed = frozen
        why = {id(w): ("it is stopped (SIGSTOP, a debugger or job control)" if w.stopped else
                       f"its process has not run for {now - w.beat_at:.0f} s (no heartbeat)")
               for w in frozen}
    elif silent:
        blamed = silent
        why = {id(w): f"it never reported after starting ({now - w.started:.0f} s ago)"
               for w in silent}
    else:
        least = min(w.reading.ticks for w in running)
        blamed = [w for w in running if w.reading.ticks == least]
        behind = len(blamed) < len(running)
        why = {id(w): ("it is behind its peers, which wait for it" if behind else
                       "every rank is stuck at the same point (a collective that never "
                       "completes)") for w in blamed}
    parts = [f"rank {w.rank} ({w.where}) made no progress for {w.idle(now):.0f} s: {why[id(w)]}; "
             f"it was in: {w.doing}" for w in blamed]
    others = [w for w in running if w not in blamed]
    if others:
        parts.append("Waiting for it: " + "; ".join(f"rank {w.rank} in {w.doing}" for w in others))
    parts.append(f"Stopped after {timeout:g} s without progress (--timeout or {TIMEOUT_ENV}; "
                 f"default {DEFAULT_TIMEOUT_S:g} s)")
    return blamed, ". ".join(parts)
