"""A rank whose collective breaks tells a peer's stop from a real failure by its own signal."""

from __future__ import annotations

import os
import signal
import threading
import time

from willitscale.bench.ranks.worker import _StopOnSignal


def test_a_stop_signal_just_after_a_broken_collective_counts_as_stopping():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        stop = _StopOnSignal()
        # no signal: a real failure, reported once the wait is over
        started = time.monotonic()
        assert not stop.arrives_within(0.1)
        assert time.monotonic() - started >= 0.1
        # the launcher's signal arrives 50 ms after the peer broke the collective: stopping
        threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGTERM)).start()
        assert stop.arrives_within(10.0)
        # once asked for, at once; a second signal is ignored (it must not cut the saving short)
        os.kill(os.getpid(), signal.SIGTERM)
        assert stop.arrives_within(0.0)
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
