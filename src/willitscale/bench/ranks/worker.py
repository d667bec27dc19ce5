"""Running one benchmark inside a worker: join the job, record the environment, measure,
store every row as it comes (rank 0), and hand the rows back for printing.

Ctrl-C or SIGTERM during a sweep stops it at the next point where Python runs (between two
ops, or when the op in flight returns); the rows measured so far are already committed and the
run is marked ``interrupted``. Only the first such signal interrupts: a Ctrl-C at a terminal
reaches every process of the job and the launcher forwards it as well, and the second copy must
not cut short the saving and printing of the finished rows. A collective failing because a
peer has already stopped is part of stopping, not a failure, when this rank's own stop is asked
for by then or within :data:`PEER_STOP_GRACE_S` (its signal may come a moment after the peer's).
When none comes (another node's rank died; torchrun), the failure is reported as lost contact
with the peers, naming what this rank was doing -- not as an internal error.

Started by willitscale's launcher, a rank keeps a heartbeat for it (what it is doing, how far
it got: :mod:`willitscale.bench.ranks.heartbeat`) and stops when the launcher is gone
(:mod:`willitscale.bench.ranks.lifeline`). A store that cannot be written (a full disk, a damaged
file) stops the run with the store's own message; every row committed before is kept.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from willitscale.bench.environment import (
    host_facts,
    node_id,
    summarize_environment,
    torch_facts,
)
from willitscale.bench.kernel_options import BENCH_OPTION_TYPES as OPTION_TYPES
from willitscale.bench.provenance import provenance_of
from willitscale.bench.ranks import heartbeat as heartbeats
from willitscale.bench.ranks.lifeline import ParentWatch
from willitscale.errors import BenchmarkError, ConfigError, StoreError, WillItScaleError

__all__ = ["Job", "JobResult", "run_job", "PEER_STOP_GRACE_S"]

#: how long a rank whose collective failed waits for its own stop signal before calling the
#: failure real (a genuine failure is reported this much later)
PEER_STOP_GRACE_S = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Job:
    """A benchmark to run: its kind, validated options, and what to do with the results."""

    kind: str
    options: Any  #: CollectiveOptions | MatmulOptions | TrainOptions
    json: bool = False
    label: str = ""
    store: bool = True
    plot: str = ""  #: folder rank 0 draws the figures into (collectives: busbw vs size)
    format: str = "table"  #: how rank 0 prints the rows: "table", or "nccl-tests" (collectives)

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "options": self.options.to_json(), "json": self.json,
                "label": self.label, "store": self.store, "plot": self.plot, "format": self.format}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Job:
        kind = data["kind"]
        if kind not in OPTION_TYPES:
            raise ConfigError("kind", kind, "one of " + ", ".join(OPTION_TYPES))
        return cls(kind=kind, options=OPTION_TYPES[kind].from_json(data["options"]),
                   json=bool(data.get("json")), label=str(data.get("label", "")),
                   store=bool(data.get("store", True)), plot=str(data.get("plot") or ""),
                   format=str(data.get("format") or "table"))


@dataclass(slots=True, kw_only=True)
class JobResult:
    """What rank 0 measured (other ranks get an empty result with ``rank != 0``)."""

    rank: int
    rows: list[Any] = field(default_factory=list)
    run_id: int | None = None
    status: str = "complete"
    reason: str = ""  #: why it failed (stored with the run)
    environment: Mapping[str, Any] | None = None


class _StopOnSignal:
    """SIGINT/SIGTERM handlers: the first signal raises KeyboardInterrupt, later ones are ignored.

    SIGINT is left alone when it was ignored at start (a job started in the background): as in
    any Python program, Ctrl-C at the terminal does not stop such a job; SIGTERM still does.
    """

    def __init__(self) -> None:
        self.requested = False
        signal.signal(signal.SIGTERM, self._handle)
        if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
            signal.signal(signal.SIGINT, self._handle)

    def _handle(self, signum, frame) -> None:  # noqa: ARG002 - signal handler signature
        if self.requested:
            return
        self.requested = True
        raise KeyboardInterrupt

    def arrives_within(self, seconds: float) -> bool:
        """Whether a stop is (or gets) asked for within ``seconds``. A collective broken by a
        peer that stopped first can fail a moment before this rank's own signal arrives: a
        launcher signals its ranks one after another, and other nodes' launchers later still."""
        deadline = time.monotonic() + seconds
        try:
            while not self.requested and time.monotonic() < deadline:
                time.sleep(0.01)
        except KeyboardInterrupt:
            pass
        return self.requested


def _lost_peers(exc: BaseException, ctx, doing: str) -> BenchmarkError | None:
    """The error to report when a collective failed because a peer is gone (its connection
    closed, a timeout), or ``None`` for any other failure (then it is shown as it is)."""
    dist = ctx.torch.distributed
    dist_error = getattr(dist, "DistError", ())
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    peerish = any(word in str(exc) for word in ("Connection closed", "Connection reset",
                                                  "Broken pipe", "Timed out", "timed out",
                                                  "Socket Timeout", "peer"))
    if isinstance(exc, WillItScaleError) or not (isinstance(exc, dist_error) or peerish):
        return None
    return BenchmarkError(f"rank {ctx.rank} lost contact with its peers while in {doing} "
                          f"({type(exc).__name__}: {text}): another rank stopped, died or hangs; "
                          "its launcher or torchrun names it")


def _environment(ctx) -> dict[str, Any]:
    facts = {"host": host_facts() if ctx.local_rank == 0 else {"node": node_id()},
             "torch": torch_facts(ctx.torch, ctx.backend), "local_rank": ctx.local_rank,
             "pid": os.getpid()}
    everyone = ctx.gather_objects(facts)
    devices = ctx.gather_objects(ctx.device_name)
    from willitscale.results.store import now_iso

    environment = summarize_environment(everyone, backend=ctx.backend, device_names=devices)
    # one flat record (GPU, driver, CUDA, torch, clocks, date, host) stored with every run
    environment["provenance"] = provenance_of(environment, date=now_iso())
    return environment


def _bench(job: Job, ctx, emit, environment) -> None:
    if job.kind == "collectives":
        from willitscale.bench.collectives import run_collectives

        run_collectives(ctx, job.options, emit)
    elif job.kind == "matmul":
        from willitscale.bench.matmul import run_matmul

        run_matmul(ctx, job.options, emit)
    elif job.kind == "attention":
        from willitscale.bench.attention import run_attention

        run_attention(ctx, job.options, emit)
    elif job.kind == "bandwidth":
        from willitscale.bench.bandwidth import run_bandwidth

        run_bandwidth(ctx, job.options, emit)
    else:
        from willitscale.bench.train import run_train

        run_train(ctx, job.options, emit, nodes=environment["nodes"])


def run_job(job: Job) -> JobResult:
    """Run ``job`` in this worker (RANK/WORLD_SIZE/... must be set)."""
    from willitscale.bench.ranks import dist

    stop = _StopOnSignal()
    beat = heartbeats.from_env(on_beat=ParentWatch.from_env())
    ctx = dist.init(job.options.backend, heartbeat=beat)
    result = JobResult(rank=ctx.rank)
    store = None
    try:
        beat.enter("gathering the environment of every rank")
        environment = _environment(ctx)
        if ctx.rank == 0:
            result.environment = environment
            if job.store:
                from willitscale.results.store import Store

                store = Store()
                result.run_id = store.start_run(job.kind, options=job.options.to_json(),
                                                environment=environment, label=job.label)
                beat.set_run(result.run_id)

        def emit(row) -> None:
            if ctx.rank != 0:
                return
            if store is not None:
                store.add_row(result.run_id, len(result.rows), row.to_json())
            result.rows.append(row)

        _bench(job, ctx, emit, environment)
    except KeyboardInterrupt:
        result.status = "interrupted"
    except BaseException as exc:
        # a peer that stopped first broke the collective in flight: part of stopping
        doing = beat.doing
        if not stop.arrives_within(PEER_STOP_GRACE_S):
            result.status = "failed"
            lost = _lost_peers(exc, ctx, doing)
            result.reason = f"rank {ctx.rank}: {lost or exc}"
            if lost is not None:
                raise lost from None
            raise
        result.status = "interrupted"
    finally:
        if store is not None:
            try:
                store.finish_run(result.run_id, result.status, reason=result.reason)
            except StoreError:  # after a failure, that failure is the one to report
                if result.status != "failed":
                    raise
            store.close()
        if result.status == "complete":  # after a failure a peer may be gone: no teardown
            beat.enter("the final barrier")
            ctx.barrier()  # nobody tears down while a peer still talks to it
            ctx.close()
        beat.enter("printing and saving the results", waits=False)
    return result
