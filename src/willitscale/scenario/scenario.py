"""A scenario: the model, the cluster, the plan and the assumptions of one estimate.

A :class:`Scenario` is everything :func:`willitscale.estimation.estimate.estimate` needs, validated:
either a transformer shape (``model``) or, for back-of-envelope use, only a parameter count
(``params``), never both; :func:`willitscale.scenario.validate.check_plan` rejects a plan the model
cannot be split by, naming the field. The options the step depends on live in small frozen
objects: :class:`DdpOptions` (buckets, overlap, gradient dtype), :class:`DataLoading` (the
"step 0" of Ray's 'Will it scale to N GPUs?'), :class:`Measured` (measurements that replace a modelled time:
the single-GPU step time of 'The Impact of GPU Networking (Part 1)' and a measured all-reduce) and
:class:`~willitscale.scenario.options.ParallelOptions` (placement order, TP overlap, attention).

Scenarios are built from CLI flags or TOML files by :mod:`willitscale.scenario.settings`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from willitscale.compute.efficiency import DEFAULT_OVERLAP_SLOWDOWN, Efficiency
from willitscale.compute.kernels import OPTIMIZER_BYTES
from willitscale.compute.options import ComputeOptions
from willitscale.errors import ConfigError, UnknownNameError
from willitscale.hardware.model import Cluster
from willitscale.memory.buffers import DeepSpeedOptions
from willitscale.memory.device import CUDA_CONTEXT_BYTES
from willitscale.memory.stage import DEFAULT_MEMORY_FRACTION
from willitscale.memory.state import CONVENTIONS
from willitscale.scenario.options import ParallelOptions
from willitscale.scenario.plan import Plan
from willitscale.scenario.validate import check_plan
from willitscale.workload.transformer import SHAPE_LIMITS, Transformer

__all__ = ["DEFAULT_BUCKET_CAP_BYTES", "DEFAULT_FIRST_BUCKET_BYTES", "MIN_BUCKET_CAP_BYTES", "GRAD_DTYPES", "DTYPE_BYTES", "DdpOptions", "DataLoading", "Measured", "Scenario", "FITTED_KNOBS"]

MIB = 1024 * 1024
#: plan knobs the estimate may fit when they are not given (estimation.fit)
FITTED_KNOBS = ("zero", "sequence_parallel", "recompute")
#: ``bucket_cap_mb=25`` (PyTorch DDP default), converted as PyTorch does: ``25 * 1024 * 1024``.
DEFAULT_BUCKET_CAP_BYTES = 25 * MIB
#: ``kDefaultFirstBucketBytes = int(1024 * 1024)`` in ``torch/csrc/distributed/c10d/reducer.hpp``.
DEFAULT_FIRST_BUCKET_BYTES = 1 * MIB
#: the least ``--bucket-cap`` accepted: below it every bucket's all-reduce is latency-bound (a
#: 64 KiB ring all-reduce over 8 GPUs is ~9 us of latency for ~1 us of bytes on NVLink) and a
#: large model makes millions of buckets
MIN_BUCKET_CAP_BYTES = 64 * 1024
#: bytes per element of the dtypes gradients may be reduced in
DTYPE_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2}
GRAD_DTYPES = tuple(DTYPE_BYTES)


@dataclass(frozen=True, slots=True, kw_only=True)
class DdpOptions:
    """How DDP synchronises gradients (PyTorch defaults)."""

    overlap: bool = True  #: all-reduce buckets during backward (False: after it, one by one)
    bucket_cap: float = DEFAULT_BUCKET_CAP_BYTES  #: bytes (``bucket_cap_mb=25`` = 25 MiB)
    first_bucket: float = DEFAULT_FIRST_BUCKET_BYTES  #: bytes (1 MiB)
    grad_reduce_dtype: str = "fp32"  #: PyTorch AMP keeps fp32 gradients; bf16 halves the bytes
    overlap_slowdown: float = DEFAULT_OVERLAP_SLOWDOWN  #: extra compute s per s of overlap
    #: ``DistributedDataParallel(gradient_as_bucket_view=...)``: False (PyTorch's default) keeps
    #: the gradients and a copy of them in the buckets; True makes the gradients views of the
    #: buckets ("the saved memory size will be equal to the total gradients size", PyTorch docs)
    gradient_as_bucket_view: bool = False

    def __post_init__(self) -> None:
        if self.grad_reduce_dtype not in GRAD_DTYPES:
            raise ConfigError("grad_reduce_dtype", self.grad_reduce_dtype,
                              "one of " + ", ".join(GRAD_DTYPES))
        if not self.bucket_cap >= MIN_BUCKET_CAP_BYTES:
            raise ConfigError("bucket_cap", self.bucket_cap,
                              f"a size >= {MIN_BUCKET_CAP_BYTES // 1024} KiB (smaller buckets are "
                              "all latency; PyTorch's default is 25 MiB)")
        if not self.first_bucket > 0:
            raise ConfigError("first_bucket", self.first_bucket, "a size > 0")
        if not 0 <= self.overlap_slowdown <= 1:
            raise ConfigError("overlap_slowdown", self.overlap_slowdown, "a fraction in [0, 1]")

    @property
    def grad_bytes(self) -> int:
        """Bytes per gradient element on the wire."""
        return DTYPE_BYTES[self.grad_reduce_dtype]


@dataclass(frozen=True, slots=True, kw_only=True)
class DataLoading:
    """Reading each step's samples from storage ("step 0" of Ray's 'Will it scale to N GPUs?')."""

    sample_bytes: float  #: bytes read per sample
    storage_bandwidth: float  #: bytes/s into one node from storage, shared by its GPUs
    overlapped: bool = True  #: prefetched during the previous step (DataLoader workers)

    def __post_init__(self) -> None:
        if not self.sample_bytes >= 0:
            raise ConfigError("sample_bytes", self.sample_bytes, "a size >= 0")
        if not self.storage_bandwidth > 0:
            raise ConfigError("storage_bandwidth", self.storage_bandwidth, "a bandwidth > 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Measured:
    """Measurements that replace a modelled time (calibration inputs of 'The Impact of GPU Networking (Part 1)')."""

    #: seconds of one optimizer step on one GPU alone with the same per-GPU batch (forward,
    #: backward, optimizer and whatever else the measurement held), replacing FLOPs/efficiency
    step_time_one_gpu: float | None = None
    allreduce_time: float | None = None  #: seconds of one measured all-reduce ...
    allreduce_size: float | None = None  #: ... of this many bytes (default: the gradients)

    def __post_init__(self) -> None:
        for name in ("step_time_one_gpu", "allreduce_time", "allreduce_size"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(name, value, "a number > 0")
        if self.allreduce_size is not None and self.allreduce_time is None:
            raise ConfigError("a measured all-reduce size needs its time (--allreduce-time)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """One question: this model (or parameter count), on this cluster, with this plan."""

    cluster: Cluster
    plan: Plan
    seq_len: int
    model: Transformer | None = None
    params: float | None = None  #: parameter count when no shape is known (back-of-envelope)
    dtype: str = "bf16"  #: compute dtype: selects the GPU's peak
    efficiency: Efficiency | None = None  #: None: the documented default for GPU and dtype
    #: training-state convention (memory.state), a low-level override of the framework's bytes
    memory_convention: str = ""
    ddp: DdpOptions = field(default_factory=DdpOptions)
    data: DataLoading | None = None
    measured: Measured = field(default_factory=Measured)
    calibration: Any = None  #: a willitscale.hardware.calibration.Calibration, when given
    network: Any = None  #: a willitscale.fabric.FlowNetwork (--network flow); None: the analytic model
    options: ParallelOptions = field(default_factory=ParallelOptions)  #: placement, overlap, attention
    compute: ComputeOptions = field(default_factory=ComputeOptions)  #: kernels: attention, fusion, FP8
    #: share of HBM a plan may fill (the planner's rule too); the CUDA context, NCCL and the
    #: allocator's reserve are counted (memory.device), so 1 by default
    memory_fraction: float = DEFAULT_MEMORY_FRACTION
    #: adamw-fused (28 B/param of HBM traffic) or adamw-foreach (80: torch.optim.AdamW's default)
    optimizer: str = "adamw-fused"
    name: str = ""
    defaults_applied: tuple[str, ...] = ()  #: what the builder filled in, for the report
    cuda_context: float = CUDA_CONTEXT_BYTES  #: bytes outside PyTorch's allocator (memory.device)
    deepspeed: DeepSpeedOptions = field(default_factory=DeepSpeedOptions)
    #: full recomputation's saved layer inputs split over the tensor-parallel ranks
    distribute_saved_activations: bool = False
    #: plan knobs the user did not give, which the estimate fits (estimation.fit): any of
    #: "zero", "sequence_parallel", "recompute"
    unstated: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.model is None) == (self.params is None):
            raise ConfigError("give the model either as a shape (--model) or as a parameter "
                              "count (--params), not " + ("both" if self.model else "neither"))
        if self.optimizer not in OPTIMIZER_BYTES:
            raise ConfigError("optimizer", self.optimizer, "one of " + ", ".join(OPTIMIZER_BYTES))
        if not 0 < self.memory_fraction <= 1:
            raise ConfigError("memory_fraction", self.memory_fraction, "a fraction in (0, 1]")
        if self.memory_convention and self.memory_convention not in CONVENTIONS:
            raise UnknownNameError("memory convention", self.memory_convention, CONVENTIONS)
        if not self.cuda_context >= 0:
            raise ConfigError("cuda_context", self.cuda_context, "a size >= 0")
        bad = [k for k in self.unstated if k not in FITTED_KNOBS]
        if bad:
            raise ConfigError("unstated", bad[0], "one of " + ", ".join(FITTED_KNOBS))
        if self.params is not None and not self.params >= 1:
            raise ConfigError("params", self.params, "a parameter count >= 1, e.g. 2e9")
        longest = SHAPE_LIMITS["seq_len"]
        if isinstance(self.seq_len, bool) or not isinstance(self.seq_len, int) or \
                not 1 <= self.seq_len <= longest:
            raise ConfigError("seq_len", self.seq_len, f"an integer from 1 to {longest:,}")
        if (self.model is not None and self.model.position == "learned"
                and self.seq_len > self.model.max_positions):
            raise ConfigError("seq_len", self.seq_len,
                              f"<= {self.model.max_positions}, the learned position table of "
                              f"{self.model.name}")
        self.plan.check_cluster(self.cluster.gpus)

        check_plan(self)

    @property
    def has_shape(self) -> bool:
        return self.model is not None

    @property
    def tokens_per_step(self) -> int:
        """Tokens in one optimizer step over all replicas."""
        return self.plan.global_batch * self.seq_len

    def __repr__(self) -> str:
        what = self.model.name if self.model is not None else f"{self.params:.3g} parameters"
        return (f"Scenario({self.name + ': ' if self.name else ''}{what} on {self.cluster!r}, "
                f"{self.plan!r}, seq_len {self.seq_len}, {self.dtype})")
