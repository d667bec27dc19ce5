"""A rank's heartbeat and progress, shared with its launcher through a small file.

The launcher gives each rank a file (:data:`PROGRESS_ENV`) in a private folder; the rank maps
it into memory and keeps four things there, which the launcher reads every fraction of a
second:

* ``beats``: counted up once a second by a thread of the rank. It stops when the process
  does not run at all (SIGSTOP, a debugger, a frozen machine).
* ``ticks``: counted up by the rank's main thread each time it gets somewhere: every op of
  a timed loop, every barrier, every phase. It stops when the rank is stuck -- most often in
  a collective that a peer never joins.
* what the rank is doing (``all_reduce 65,536 B out-of-place: timed ops``), and whether that
  waits on peers (then the launcher judges it by ``ticks``) or is the rank's own work --
  starting up, storing, drawing plots (then only by ``beats``: a long local step is not a hang).
* the id of the run rank 0 stores, so the launcher can mark it failed, with the reason, when a
  rank dies.

A tick is one store into shared memory (no system call), cheap beside the smallest op timed.
Without the variable (torchrun, a test) every method does nothing.
"""

from __future__ import annotations

import mmap
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PROGRESS_ENV", "Heartbeat", "NoHeartbeat", "Reading", "read", "from_env", "SIZE"]

PROGRESS_ENV = "WILLITSCALE_PROGRESS_FILE"
BEAT_S = 1.0

# beats u64 | ticks u64 | run id i64 | generation u32 | waits u8 | text length u8 | text
_HEAD = struct.Struct("<QQqIBB")
_TEXT = 226
SIZE = _HEAD.size + _TEXT  # 252
_BEATS, _TICKS = struct.Struct("<Q"), struct.Struct("<Q")


@dataclass(frozen=True, slots=True)
class Reading:
    """One look at a rank's file."""

    beats: int
    ticks: int
    run_id: int | None
    waits: bool  #: the rank's current phase waits on its peers
    doing: str


class Heartbeat:
    """The rank's side: what it is doing, how far it got, that it is alive."""

    def __init__(self, path: str | Path, on_beat=None):
        fd = os.open(path, os.O_RDWR)
        try:
            os.ftruncate(fd, SIZE)
            self._map = mmap.mmap(fd, SIZE)
        finally:
            os.close(fd)
        self._ticks = 0
        self.doing = ""
        self._generation = 0
        self._beats = 0
        self._on_beat = on_beat
        self._stop = threading.Event()
        self.enter("starting", waits=False)
        self._thread = threading.Thread(target=self._beat, name="willitscale-heartbeat",
                                        daemon=True)
        self._thread.start()

    def _beat(self) -> None:
        while not self._stop.wait(BEAT_S):
            self._beats += 1
            _BEATS.pack_into(self._map, 0, self._beats)
            if self._on_beat is not None:
                self._on_beat()

    def tick(self) -> None:
        """One more step done (an op, a barrier)."""
        self._ticks += 1
        _TICKS.pack_into(self._map, 8, self._ticks)

    def enter(self, doing: str, *, waits: bool = True) -> None:
        """Now doing ``doing``; ``waits``: it depends on the peers (judged by progress)."""
        self.doing = doing
        text = doing.encode("utf-8")[:_TEXT]
        self._generation += 1  # odd while the record changes: a reader tries again
        struct.pack_into("<I", self._map, 24, self._generation)
        struct.pack_into(f"<BB{len(text)}s", self._map, 28, int(waits), len(text), text)
        self._generation += 1
        struct.pack_into("<I", self._map, 24, self._generation)
        self.tick()

    def set_run(self, run_id: int) -> None:
        struct.pack_into("<q", self._map, 16, run_id)

    def close(self) -> None:
        self._stop.set()


class NoHeartbeat:
    """Not started by willitscale's launcher: nobody reads a heartbeat (what the rank is doing
    is still kept, for its own error messages)."""

    def __init__(self) -> None:
        self.doing = ""

    def tick(self) -> None:
        pass

    def enter(self, doing: str, *, waits: bool = True) -> None:
        self.doing = doing

    def set_run(self, run_id: int) -> None:
        pass

    def close(self) -> None:
        pass


def read(path: str | Path) -> Reading | None:
    """The launcher's side: the rank's file now (``None`` before the rank has written it)."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return None
    if len(data) < SIZE:
        return None
    for _ in range(3):
        beats, ticks, run_id, generation, waits, length = _HEAD.unpack_from(data)
        if generation % 2 == 0:
            break
        data = Path(path).read_bytes()  # caught mid-write: look again
    if ticks == 0:
        return None
    text = data[_HEAD.size:_HEAD.size + length].decode("utf-8", "replace")
    return Reading(beats=beats, ticks=ticks, run_id=run_id if run_id > 0 else None,
                   waits=bool(waits), doing=text)


def from_env(on_beat=None) -> Heartbeat | NoHeartbeat:
    path = os.environ.get(PROGRESS_ENV)
    if not path:
        return NoHeartbeat()
    return Heartbeat(path, on_beat=on_beat)
