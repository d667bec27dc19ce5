"""The built-in launcher: start a node's ranks as ``python -m willitscale bench`` processes.

Single node (``--nproc N``): the launcher hosts the rendezvous store on a port the kernel picks
(port 0), so no port is fixed or guessed, and passes it to the workers. Several nodes (what
``willitscale emulate`` sets up, or ``--nnodes/--node-rank/--master-addr/--master-port`` by
hand): the launcher of node 0 hosts the store at ``MASTER_ADDR:MASTER_PORT`` and every worker
joins it. Global ranks are ``node_rank * nproc + local_rank``, as torchrun numbers them.

Rank 0's standard output is relayed through this process (so ``--json`` output can be piped
or captured); the other ranks print nothing there. If a rank fails, the others are stopped.

Ctrl-C or SIGTERM here is passed on to the ranks as SIGINT (each stops at its next op, rank 0
keeps and prints the finished rows); ranks still running after :data:`GRACE_S` are killed.
Further signals during that wait are ignored (a terminal's Ctrl-C reaches the ranks directly
too), so the launcher never leaves without its ranks.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass

from willitscale.bench.dist import AGENT_STORE_ENV, import_torch
from willitscale.bench.options import OPTIONS_ENV
from willitscale.errors import BenchmarkError, ConfigError

__all__ = ["LaunchSpec", "launch", "LAUNCH_ENVS"]

#: Set by ``willitscale emulate`` (and usable by hand): defaults for the launch flags.
LAUNCH_ENVS = {"nproc": "WILLITSCALE_NPROC_PER_NODE", "nnodes": "WILLITSCALE_NNODES",
               "node_rank": "WILLITSCALE_NODE_RANK"}
GRACE_S = 10.0


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


def _host_store(spec: LaunchSpec):
    """Node 0 hosts the rendezvous store; returns (store, port)."""
    torch = import_torch()
    from datetime import timedelta

    try:
        store = torch.distributed.TCPStore(spec.master_addr, spec.master_port, is_master=True,
                                           wait_for_workers=False, timeout=timedelta(minutes=30))
    except (RuntimeError, OSError) as exc:
        raise BenchmarkError(f"cannot listen on {spec.master_addr}:{spec.master_port} for the "
                             f"rendezvous: {exc}") from None
    return store, store.port


def _worker_env(spec: LaunchSpec, local_rank: int, port: int, payload: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({
        "RANK": str(spec.node_rank * spec.nproc + local_rank), "WORLD_SIZE": str(spec.world_size),
        "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(spec.nproc),
        "GROUP_RANK": str(spec.node_rank), "MASTER_ADDR": spec.master_addr,
        "MASTER_PORT": str(port), AGENT_STORE_ENV: "1", OPTIONS_ENV: payload,
    })
    return env


def _relay(stream, out) -> None:
    for line in iter(stream.readline, ""):
        out.write(line)
        out.flush()


def _stop(procs: list[subprocess.Popen], sig: int) -> None:
    for p in procs:
        if p.poll() is None:
            try:
                p.send_signal(sig)
            except ProcessLookupError:
                pass


def _interrupt(procs: list[subprocess.Popen]) -> None:
    """Ask every rank to stop, wait up to :data:`GRACE_S`, kill the rest; signals ignored."""
    previous = {sig: signal.signal(sig, signal.SIG_IGN) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        _stop(procs, signal.SIGINT)
        deadline = time.monotonic() + GRACE_S
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(0.05)
        _stop(procs, signal.SIGKILL)
        for p in procs:
            p.wait()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _sigterm_to_interrupt(signum, frame):  # noqa: ARG001 - signal handler signature
    raise KeyboardInterrupt


def _wait(procs: list[subprocess.Popen]) -> int:
    """Wait for every rank; when one fails, stop the others. Returns the first failure's code."""
    failed = None
    while any(p.poll() is None for p in procs):
        bad = [p for p in procs if p.returncode not in (None, 0)]
        if bad and failed is None:
            failed = bad[0].returncode
            _stop(procs, signal.SIGTERM)
            deadline = time.monotonic() + GRACE_S
            while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
                time.sleep(0.05)
            _stop(procs, signal.SIGKILL)
        time.sleep(0.05)
    codes = [p.returncode for p in procs]
    return failed if failed is not None else next((c for c in codes if c != 0), 0)


def launch(kind: str, job_json: Mapping, spec: LaunchSpec) -> int:
    """Run benchmark ``kind`` on this node's ``spec.nproc`` ranks; returns the exit status."""
    store, port = _host_store(spec) if spec.node_rank == 0 else (None, spec.master_port)
    payload = json.dumps(job_json)
    procs: list[subprocess.Popen] = []
    relay = None
    # SIGTERM (a job scheduler, `timeout`, `kill`) stops the ranks as Ctrl-C does: without
    # this the launcher would die alone and leave its ranks running
    previous_term = signal.signal(signal.SIGTERM, _sigterm_to_interrupt)
    try:
        for local_rank in range(spec.nproc):
            is_rank0 = spec.node_rank == 0 and local_rank == 0
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "willitscale", "bench", kind],
                env=_worker_env(spec, local_rank, port, payload),
                stdout=subprocess.PIPE if is_rank0 else subprocess.DEVNULL, text=True))
            if is_rank0:
                relay = threading.Thread(target=_relay, args=(procs[-1].stdout, sys.stdout),
                                         daemon=True)
                relay.start()
        code = _wait(procs)
    except KeyboardInterrupt:
        _interrupt(procs)
        if relay is not None:
            relay.join(timeout=GRACE_S)
        raise
    finally:
        signal.signal(signal.SIGTERM, previous_term)
        del store
    if relay is not None:
        relay.join(timeout=GRACE_S)
    return code
