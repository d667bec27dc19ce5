"""Joining a torch.distributed job from inside a benchmark worker.

A worker learns its place from the environment torchrun (or our spawner, or Slurm via
torchrun) sets: ``RANK``, ``WORLD_SIZE``, ``LOCAL_RANK``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT``. With NCCL each rank drives the GPU of its local rank. When
our spawner hosts the rendezvous store (:data:`AGENT_STORE_ENV`), workers join it as clients,
so no port is ever guessed.

torch's own collective timeout (its default is 30 minutes) is the progress timeout
(``WILLITSCALE_TIMEOUT_S``, :mod:`willitscale.bench.ranks.watch`; 5 minutes by default) under
torchrun, where nothing else bounds a hung collective; under willitscale's launcher it is twice
that plus 30 s, so that the launcher, which can name the rank that hangs, acts first.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from willitscale.bench.ranks.heartbeat import NoHeartbeat
from willitscale.bench.ranks.watch import TIMEOUT_ENV, timeout_s
from willitscale.errors import BenchmarkError, MissingDependency

__all__ = ["Context", "init", "import_torch", "AGENT_STORE_ENV", "TIMEOUT_ENV"]

AGENT_STORE_ENV = "WILLITSCALE_AGENT_STORE"


def import_torch():
    """torch, or a :class:`MissingDependency` saying which extra installs it."""
    try:
        import torch
        import torch.distributed  # noqa: F401
    except ImportError:
        raise MissingDependency("torch", "bench", "Benchmarking") from None
    return torch


def _env_int(name: str, default: int | None = None) -> int:
    value = os.environ.get(name)
    if value is None:
        if default is None:
            raise BenchmarkError(f"{name} is not set: launch with `willitscale bench ... --nproc N`"
                                 " or torchrun")
        return default
    try:
        return int(value)
    except ValueError:
        raise BenchmarkError(f"{name}={value!r} is not an integer") from None


@dataclass(frozen=True, slots=True)
class Context:
    """This worker's place in the job and the helpers every benchmark needs."""

    torch: Any
    rank: int
    world_size: int
    local_rank: int
    local_world_size: int
    backend: str
    device: Any  #: torch.device
    #: what this rank is doing, for its launcher (a no-op outside willitscale's launcher)
    heartbeat: Any = field(default_factory=NoHeartbeat)

    @property
    def is_cuda(self) -> bool:
        return self.device.type == "cuda"

    @property
    def device_name(self) -> str:
        if self.is_cuda:
            return self.torch.cuda.get_device_name(self.device)
        return "cpu"

    def sync(self) -> None:
        """Wait for every queued kernel of this rank (CUDA streams run ahead of the host)."""
        if self.is_cuda:
            self.torch.cuda.synchronize(self.device)

    def barrier(self) -> None:
        """All ranks reach this point, and their devices are idle, before anyone goes on."""
        self.heartbeat.tick()
        self.sync()
        if self.is_cuda:  # NCCL's barrier is an all-reduce on this rank's GPU: name it
            self.torch.distributed.barrier(device_ids=[self.device.index])
        else:
            self.torch.distributed.barrier()
        self.sync()

    def clock(self) -> float:
        """Host time in seconds; call :meth:`sync` first when timing device work."""
        return time.perf_counter()

    def reduce_time(self, seconds: float, how: str = "max") -> float:
        """Combine one time from every rank: ``max`` (the slowest rank), ``min``, ``mean``,
        or ``rank0`` (rank 0's own) -- nccl-tests' ``-a`` options."""
        torch, dist = self.torch, self.torch.distributed
        self.heartbeat.tick()
        t = torch.tensor([seconds], dtype=torch.float64, device=self.device)
        if how == "rank0":
            dist.broadcast(t, 0)
        else:
            op = {"max": dist.ReduceOp.MAX, "min": dist.ReduceOp.MIN, "mean": dist.ReduceOp.SUM}[how]
            dist.all_reduce(t, op=op)
            if how == "mean":
                t /= self.world_size
        return float(t.item())

    def sum_int(self, value: int) -> int:
        self.heartbeat.tick()
        t = self.torch.tensor([value], dtype=self.torch.int64, device=self.device)
        self.torch.distributed.all_reduce(t)
        return int(t.item())

    def gather_objects(self, obj: Any) -> list[Any]:
        """Every rank's ``obj`` (picklable), in rank order, on every rank."""
        out: list[Any] = [None] * self.world_size
        self.heartbeat.tick()
        self.torch.distributed.all_gather_object(out, obj)
        return out

    def close(self) -> None:
        dist = self.torch.distributed
        if dist.is_initialized():
            dist.destroy_process_group()


def _ranks_on_this_machine(local_world: int) -> int:
    """The node's ranks -- or, in an emulated cluster, every node's: they share one CPU."""
    emulated = os.environ.get("WILLITSCALE_EMULATED")
    if emulated:
        import json

        spec = json.loads(emulated)
        return max(1, int(spec.get("nodes", 1)) * int(spec.get("ranks_per_node", local_world)))
    return max(1, local_world)


def _accepts_device_id(dist: Any) -> bool:
    """torch >= 2.3 can bind a process group to a device at init."""
    import inspect

    return "device_id" in inspect.signature(dist.init_process_group).parameters


def _backend(torch: Any, wanted: str) -> str:
    dist = torch.distributed
    if wanted == "auto":
        return "nccl" if torch.cuda.is_available() and dist.is_nccl_available() else "gloo"
    if wanted == "nccl" and not (torch.cuda.is_available() and dist.is_nccl_available()):
        raise BenchmarkError("backend nccl needs CUDA GPUs and a torch built with NCCL; "
                             "use --backend gloo (or auto)")
    if wanted == "gloo" and not dist.is_gloo_available():
        raise BenchmarkError("this torch build has no Gloo backend")
    return wanted


def init(backend: str = "auto", heartbeat: Any = None) -> Context:
    """Join the job described by the environment; returns this worker's :class:`Context`."""
    heartbeat = heartbeat or NoHeartbeat()
    heartbeat.enter("starting: importing torch", waits=False)
    torch = import_torch()
    dist = torch.distributed
    rank, world = _env_int("RANK"), _env_int("WORLD_SIZE")
    local_rank = _env_int("LOCAL_RANK", 0)
    local_world = _env_int("LOCAL_WORLD_SIZE", 1)
    backend = _backend(torch, backend)
    if backend == "nccl":
        if local_rank >= torch.cuda.device_count():
            raise BenchmarkError(f"local rank {local_rank} has no GPU: this node has "
                                 f"{torch.cuda.device_count()}; run at most that many ranks per node")
        torch.cuda.set_device(local_rank)
        device = torch.device("cuda", local_rank)
    else:
        device = torch.device("cpu")
        if "OMP_NUM_THREADS" not in os.environ:  # share the cores between the node's ranks
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // _ranks_on_this_machine(local_world)))
    progress_timeout = timeout_s(None)
    ours = os.environ.get(AGENT_STORE_ENV) == "1"
    timeout = timedelta(seconds=2 * progress_timeout + 30 if ours else progress_timeout)
    heartbeat.enter(f"joining the job ({world} ranks; rendezvous at "
                    f"{os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')})")
    # with NCCL, bind the communicator to this rank's GPU up front (eager init, no guessing)
    bound = {"device_id": device} if backend == "nccl" and _accepts_device_id(dist) else {}
    if ours:
        store = dist.TCPStore(os.environ["MASTER_ADDR"], _env_int("MASTER_PORT"),
                              is_master=False, timeout=timeout)
        dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout,
                                **bound)
    else:
        dist.init_process_group(backend, init_method="env://", rank=rank, world_size=world,
                                timeout=timeout, **bound)
    return Context(torch=torch, rank=rank, world_size=world, local_rank=local_rank,
                   local_world_size=local_world, backend=backend, device=device,
                   heartbeat=heartbeat)
