"""The built-in launcher: start a node's ranks as ``python -m willitscale bench`` processes.

Single node (``--nproc N``): the launcher hosts the rendezvous store on a port the kernel picks
(port 0), so no port is fixed or guessed, bound to the loopback address only
(:mod:`willitscale.bench.ranks.rendezvous`), and passes it to the workers. Several nodes (what
``willitscale emulate`` sets up, or ``--nnodes/--node-rank/--master-addr/--master-port`` by
hand): the launcher of node 0 hosts the store at ``MASTER_ADDR:MASTER_PORT`` and every worker
joins it. Global ranks are ``node_rank * nproc + local_rank``, as torchrun numbers them.

Rank 0's standard output is relayed through this process (so ``--json`` output can be piped
or captured); the other ranks print nothing there.

Faults (:mod:`willitscale.bench.ranks.watch`): every rank is polled, so the first one to die is
seen at once, whichever it is; each rank's heartbeat file shows whether it still moves. When a
rank dies, or no rank has moved for the timeout (``--timeout``, default 5 minutes: a stopped
rank, a collective that never completes), the launcher names the rank (its host, pid, exit
status or signal, and what it was doing), kills the ranks to blame, stops the others as on
Ctrl-C -- rank 0 keeps and prints its finished rows -- within :data:`STOP_GRACE_S`, marks the
stored run ``failed`` with that reason, and exits 1. The ranks die with the launcher, even
one killed with SIGKILL (:mod:`willitscale.bench.ranks.lifeline`).

Ctrl-C or SIGTERM here is passed on to the ranks as SIGINT (each stops at its next op, rank 0
keeps and prints the finished rows); ranks still running after :data:`GRACE_S` are killed.
Further signals during that wait are ignored (a terminal's Ctrl-C reaches the ranks directly
too), so the launcher never leaves without its ranks.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from willitscale.bench.options import OPTIONS_ENV
from willitscale.bench.ranks.dist import AGENT_STORE_ENV
from willitscale.bench.ranks.heartbeat import PROGRESS_ENV, Reading
from willitscale.bench.ranks.heartbeat import read as read_heartbeat
from willitscale.bench.ranks.lifeline import LAUNCHER_PID_ENV, die_with_parent
from willitscale.bench.ranks.rendezvous import (
    LOOPBACK_IFNAME,
    host_store,
    loopback_only,
)
from willitscale.bench.ranks.watch import (
    DEFAULT_TIMEOUT_S,
    TIMEOUT_ENV,
    RankWatch,
    failure_message,
    hang,
)
from willitscale.errors import ConfigError
from willitscale.results.store import pid_alive

__all__ = ["LaunchSpec", "launch", "Outcome", "LAUNCH_ENVS", "GRACE_S", "STOP_GRACE_S"]

#: Set by ``willitscale emulate`` (and usable by hand): defaults for the launch flags.
LAUNCH_ENVS = {"nproc": "WILLITSCALE_NPROC_PER_NODE", "nnodes": "WILLITSCALE_NNODES",
               "node_rank": "WILLITSCALE_NODE_RANK"}
#: after Ctrl-C: ranks stop at their next op, rank 0 saves and prints
GRACE_S = 10.0
#: after a rank failed or hung: the others' collectives fail at once (the peer's sockets
#: closed), so they stop within a second or two; rank 0 saving and printing included, 5 s
STOP_GRACE_S = 5.0
POLL_S = 0.05  #: how often every rank's exit is checked
READ_S = 0.5  #: how often the heartbeats are read
FOLDER_PREFIX = "willitscale-ranks-"
_NO_READING = Reading(beats=0, ticks=0, run_id=None, waits=False, doing="")


@dataclass(frozen=True, slots=True, kw_only=True)
class LaunchSpec:
    """Where this node's ranks sit in the job."""

    nproc: int
    nnodes: int = 1
    node_rank: int = 0
    master_addr: str = "127.0.0.1"
    master_port: int = 0  #: 0: pick a free one (single node only)

    def __post_init__(self) -> None:
        if self.nproc < 1:
            raise ConfigError("nproc", self.nproc, "an integer >= 1")
        if self.nnodes < 1:
            raise ConfigError("nnodes", self.nnodes, "an integer >= 1")
        if not 0 <= self.node_rank < self.nnodes:
            raise ConfigError("node_rank", self.node_rank, f"between 0 and nnodes - 1 = {self.nnodes - 1}")
        if not 0 <= self.master_port <= 65535:
            raise ConfigError("master_port", self.master_port, "a TCP port, 1..65535 (0 or unset: "
                              "a free one, single node only)")
        if self.nnodes > 1 and self.master_port == 0:
            raise ConfigError("master_port", 0, "the port node 0 listens on (every node must "
                              "be given the same --master-port or MASTER_PORT)")

    @property
    def world_size(self) -> int:
        return self.nnodes * self.nproc

    @classmethod
    def from_env(cls, *, nproc: int | None, nnodes: int | None = None,
                 node_rank: int | None = None, master_addr: str | None = None,
                 master_port: int | None = None, env: Mapping[str, str] = os.environ) -> LaunchSpec:
        """Flags first, then the environment ``willitscale emulate`` or a job script sets,
        then: one rank per GPU (one rank without GPUs), one node."""

        def pick(flag, name, default):
            if flag is not None:
                return flag
            raw = env.get(LAUNCH_ENVS[name])
            return int(raw) if raw is not None else default

        given = pick(nproc, "nproc", None)  # 0 is an error, not "the default"
        return cls(nproc=given if given is not None else _default_nproc(),
                   nnodes=pick(nnodes, "nnodes", 1), node_rank=pick(node_rank, "node_rank", 0),
                   master_addr=master_addr or env.get("MASTER_ADDR", "127.0.0.1"),
                   master_port=master_port if master_port is not None
                   else int(env.get("MASTER_PORT", "0")))


def _default_nproc() -> int:
    try:
        import torch
    except ImportError:
        return 1
    return max(1, torch.cuda.device_count())


def _worker_env(spec: LaunchSpec, local_rank: int, port: int, payload: str, *,
                progress: Path, timeout: float) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "RANK": str(spec.node_rank * spec.nproc + local_rank), "WORLD_SIZE": str(spec.world_size),
        "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(spec.nproc),
        "GROUP_RANK": str(spec.node_rank), "MASTER_ADDR": spec.master_addr,
        "MASTER_PORT": str(port), AGENT_STORE_ENV: "1", OPTIONS_ENV: payload,
        PROGRESS_ENV: str(progress), LAUNCHER_PID_ENV: str(os.getpid()),
        TIMEOUT_ENV: repr(timeout),
    })
    if loopback_only(spec.nnodes, spec.master_addr):
        env["MASTER_ADDR"] = "127.0.0.1"
        env.setdefault("GLOO_SOCKET_IFNAME", LOOPBACK_IFNAME)  # Gloo's sockets on loopback too
    return env


def _relay(stream, out) -> None:
    for line in iter(stream.readline, ""):
        out.write(line)
        out.flush()


def _running(procs: list[subprocess.Popen]) -> list[subprocess.Popen]:
    """The processes still running: every one is polled (no short-circuit), so each exit is
    seen, and reaped, when it happens."""
    return [p for p in procs if p.poll() is None]


def _signal(procs: list[subprocess.Popen], sig: int) -> None:
    for p in _running(procs):
        try:
            p.send_signal(sig)
        except ProcessLookupError:
            pass


def _wait_until(procs: list[subprocess.Popen], seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while _running(procs) and time.monotonic() < deadline:
        time.sleep(POLL_S)


def _interrupt(procs: list[subprocess.Popen]) -> None:
    """Ask every rank to stop, wait up to :data:`GRACE_S`, kill the rest; signals ignored."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _signal(procs, signal.SIGINT)
        _wait_until(procs, GRACE_S)
        _signal(procs, signal.SIGKILL)
        for p in procs:
            p.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _stop_after_fault(procs: list[subprocess.Popen], blamed: list[subprocess.Popen]) -> None:
    """A rank failed or hung: kill the ones to blame (a stopped process cannot act on
    anything gentler; their sockets closing breaks the collectives the others wait in), ask
    the rest to stop as on Ctrl-C (rank 0 keeps and prints its finished rows), kill what
    still runs after :data:`STOP_GRACE_S`."""
    _signal(blamed, signal.SIGKILL)
    _signal(procs, signal.SIGTERM)
    _wait_until(procs, STOP_GRACE_S)
    _signal(procs, signal.SIGKILL)
    for p in procs:
        p.wait()


def _sigterm_to_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt


def _is_stopped(pid: int) -> bool:
    """The kernel's state of ``pid`` is T (stopped) or t (traced): Linux ``/proc``; False
    elsewhere (the missing heartbeat still shows it)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rindex(")") + 2:][:1] in ("T", "t")


def _remove_stale_folders() -> None:
    """Heartbeat folders of launchers that were killed (SIGKILL leaves no time to clean)."""
    for folder in Path(tempfile.gettempdir()).glob(f"{FOLDER_PREFIX}*-*"):
        pid = folder.name[len(FOLDER_PREFIX):].split("-", 1)[0]
        try:
            mine = folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if pid.isdigit() and mine and not pid_alive(int(pid)):
            shutil.rmtree(folder, ignore_errors=True)


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """How this node's ranks ended: the exit status to return, and what went wrong."""

    code: int
    failure: str = ""  #: which rank failed or hung, and how; "" when none did
    run_id: int | None = None  #: the run rank 0 stored (when this node holds rank 0)
    marked: bool = False  #: the run is marked failed, with a reason


def _watch(procs: list[subprocess.Popen], watches: list[RankWatch], files: list[Path],
           timeout: float) -> tuple[int, str, str]:
    """Wait for every rank; on the first failure or hang stop the others and say why:
    ``(exit status, message, the reason to store with the run)``."""
    next_read = 0.0
    while True:
        now = time.monotonic()
        for p, w in zip(procs, watches, strict=True):
            w.exit = p.poll()
        failed = [w for w in watches if w.exit not in (None, 0)]
        if failed:  # a signal is the cause more often than an error a peer's death caused
            first = min(failed, key=lambda w: (w.exit >= 0, w.rank))
            first.observe(read_heartbeat(files[watches.index(first)]), now)  # its last word
            _stop_after_fault(procs, [])
            return 1, failure_message(first), failure_message(first, here=False)
        if all(w.exit == 0 for w in watches):
            return 0, "", ""
        if now >= next_read:
            next_read = now + READ_S
            for p, w, f in zip(procs, watches, files, strict=True):
                if w.exit is None:
                    w.observe(read_heartbeat(f), now)
                    w.stopped = _is_stopped(p.pid)
            stuck = hang(watches, now, timeout)
            if stuck is not None:
                blamed, message = stuck
                _stop_after_fault(procs, [procs[watches.index(w)] for w in blamed])
                return 1, message, message
        time.sleep(POLL_S)


def _mark_failed(run_id: int | None, reason: str, *, override: bool) -> bool:
    """Mark rank 0's run failed once every rank has stopped, with ``reason`` -- unless rank 0
    recorded its own (its error, when it was the one to fail) and ``override`` is false.
    Whether it could."""
    if run_id is None:
        return False
    from willitscale.errors import StoreError
    from willitscale.results.store import Store

    try:
        with Store() as store:
            own = store.run_info(run_id).reason
            store.finish_run(run_id, "failed", reason=reason if override or not own else "")
    except StoreError as exc:
        print(f"note: could not mark run {run_id} failed: {exc}", file=sys.stderr)
        return False
    return True


#: the rendezvous store's key where another node's launcher leaves the failure it saw
FAILURE_KEY = "willitscale/failure"


def _tell_node0(master_addr: str, port: int, reason: str) -> None:
    """Leave the failure this node saw in node 0's store, for the run rank 0 keeps there."""
    from datetime import timedelta

    from willitscale.bench.ranks.dist import import_torch

    try:
        client = import_torch().distributed.TCPStore(master_addr, port, is_master=False,
                                                     timeout=timedelta(seconds=5))
        client.set(FAILURE_KEY, reason)
    except (RuntimeError, OSError):  # node 0 is gone already: nothing to mark
        pass


def _settle(spec: LaunchSpec, store, port: int, files: list[Path], reason: str
            ) -> tuple[int | None, bool]:
    """After the ranks ended: mark rank 0's run failed with the reason this node saw, or the
    one another node left (the root cause: it wins). ``(run id, marked)``."""
    if spec.node_rank != 0:
        if reason:
            _tell_node0(spec.master_addr, port, reason)
        return None, False
    run_id = (read_heartbeat(files[0]) or _NO_READING).run_id
    remote = ""
    try:
        if store is not None and store.check([FAILURE_KEY]):
            remote = store.get(FAILURE_KEY).decode("utf-8", "replace")
    except RuntimeError:
        pass
    if not (remote or reason):
        return run_id, False
    return run_id, _mark_failed(run_id, remote or reason, override=bool(remote))


def _spawn(kind: str, spec: LaunchSpec, port: int, payload: str, files: list[Path],
           timeout: float, procs: list[subprocess.Popen], watches: list[RankWatch]) -> None:
    """Start this node's ranks (into ``procs``/``watches`` as they start)."""
    host = socket.gethostname()
    for local_rank, progress in enumerate(files):
        progress.touch(mode=0o600)
        is_rank0 = spec.node_rank == 0 and local_rank == 0
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "willitscale", "bench", kind],
            env=_worker_env(spec, local_rank, port, payload, progress=progress, timeout=timeout),
            stdout=subprocess.PIPE if is_rank0 else subprocess.DEVNULL, text=True,
            preexec_fn=die_with_parent()))  # noqa: PLW1509 - no thread runs yet
        rank = spec.node_rank * spec.nproc + local_rank
        node = f"node {spec.node_rank}, " if spec.nnodes > 1 else ""
        watches.append(RankWatch(rank=rank, where=f"{node}host {host}, pid {procs[-1].pid}",
                                 started=time.monotonic()))


def launch(kind: str, job_json: Mapping, spec: LaunchSpec, *,
           timeout: float = DEFAULT_TIMEOUT_S) -> Outcome:
    """Run benchmark ``kind`` on this node's ``spec.nproc`` ranks. ``timeout``: seconds a rank
    may go without progress before the job counts as hung."""
    store, port = (host_store(spec.master_addr, spec.master_port, nnodes=spec.nnodes,
                              timeout_s=2 * timeout + 30)
                   if spec.node_rank == 0 else (None, spec.master_port))
    _remove_stale_folders()
    folder = Path(tempfile.mkdtemp(prefix=f"{FOLDER_PREFIX}{os.getpid()}-"))  # 0700
    files = [folder / f"rank{local}.heartbeat" for local in range(spec.nproc)]
    procs: list[subprocess.Popen] = []
    watches: list[RankWatch] = []
    relay = None
    # SIGTERM (a job scheduler, `timeout`, `kill`) stops the ranks as Ctrl-C does: without
    # this the launcher would die alone and leave its ranks running
    previous_term = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    try:
        _spawn(kind, spec, port, json.dumps(job_json), files, timeout, procs, watches)
        if spec.node_rank == 0:  # after every fork: preexec_fn must not run beside a thread
            relay = threading.Thread(target=_relay, args=(procs[0].stdout, sys.stdout),
                                     daemon=True)
            relay.start()
        code, failure, reason = _watch(procs, watches, files, timeout)
        if relay is not None:
            relay.join(timeout=GRACE_S)
        run_id, marked = _settle(spec, store, port, files, reason)
    except KeyboardInterrupt:
        _interrupt(procs)
        if relay is not None:
            relay.join(timeout=GRACE_S)
        _settle(spec, store, port, files, "")  # a failure another node saw, if any
        raise
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        shutil.rmtree(folder, ignore_errors=True)
    return Outcome(code=code, failure=failure, run_id=run_id, marked=marked)
