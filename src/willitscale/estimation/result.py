"""The frozen result of an estimate: :class:`StepEstimate` and its named parts.

Everything is SI inside (seconds, bytes, FLOPs); :meth:`StepEstimate.to_json` puts the unit in
every key (``step_time_s``, ``memory_per_gpu_bytes``). A field that cannot be known from the
inputs (activation memory without a model shape) is ``None`` and says why in ``unknowns``,
never a made-up number.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from willitscale.estimation.display import html_table
from willitscale.estimation.timeline import Timeline
from willitscale.memory.device import RESERVED_RATIO
from willitscale.units import format_count, format_size, format_time

__all__ = ["Breakdown", "ComputeKinds", "MemoryBreakdown", "CommReport", "Bottleneck",
           "StepEstimate", "Deferred"]


class Deferred:
    """A part of an estimate made on first use and kept: the timeline, which only the text
    report, ``--json`` and the trace read (a plan search, ``requirements`` or a sweep's table
    never do). Equal when the values are; pickled as the value (a sweep's worker sends its
    estimates back to the parent process)."""

    __slots__ = ("_make", "_value", "_made")

    def __init__(self, make) -> None:
        self._make, self._value, self._made = make, None, False

    @classmethod
    def of(cls, value) -> Deferred:
        """One already made."""
        out = cls(None)
        out._value, out._made = value, True
        return out

    def get(self):
        if not self._made:
            self._value, self._made, self._make = self._make(), True, None
        return self._value

    def __eq__(self, other) -> bool:
        return isinstance(other, Deferred) and self.get() == other.get()

    __hash__ = None

    def __reduce__(self):
        return Deferred.of, (self.get(),)

    def __repr__(self) -> str:
        return f"Deferred({self._value!r})" if self._made else "Deferred(not made yet)"


@dataclass(frozen=True, slots=True, kw_only=True)
class Breakdown:
    """Where one step's time goes; the parts add up to the step time."""

    data_loading: float  #: storage reads not hidden behind the previous step
    forward: float
    backward: float  #: includes recomputation
    overlap_slowdown: float  #: compute lost to NCCL kernels sharing the GPU during overlap
    exposed_comms: float  #: communication still running when backward ends
    optimizer: float
    bubble: float = 0.0  #: pipeline bubble (model parallelism; 0 for data parallelism)

    @property
    def total(self) -> float:
        return sum(getattr(self, f.name) for f in fields(self))

    def to_json(self) -> dict[str, float]:
        return {f"{f.name}_s": getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeKinds:
    """Where the compute time of a step goes, per op kind (the critical GPU, all micro-batches,
    recomputation included): GEMMs, the attention kernel, memory-bound operations and the
    kernels' fixed costs. Only the per-op model splits compute so (a flat efficiency does not)."""

    gemm: float
    attention: float
    memory: float  #: norms, activations, rotary, residuals, dropout, cross-entropy, FP8 casts
    overhead: float  #: each kernel's fixed cost
    recompute: float = 0.0  #: of the above, what recomputation reruns
    forward: float = 0.0
    backward: float = 0.0  #: incl. recomputation

    @property
    def total(self) -> float:
        return self.gemm + self.attention + self.memory + self.overhead

    def share(self, kind: str) -> float:
        return getattr(self, kind) / self.total if self.total > 0 else 0.0

    def to_json(self) -> dict[str, float]:
        out = {f"{k}_s": getattr(self, k) for k in ("gemm", "attention", "memory", "overhead",
                                                     "recompute", "forward", "backward")}
        out.update({f"{k}_share": self.share(k) for k in ("gemm", "attention", "memory", "overhead")})
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryBreakdown:
    """Bytes per GPU by component against the GPU's memory (docs/memory.md). ``activations`` is
    None when it cannot be known (no model shape)."""

    weights: float
    gradients: float
    optimizer: float  #: optimizer states (Adam's moments)
    activations: float | None
    capacity: float  #: the GPU's memory
    convention: str  #: the training-state bytes used: the framework's, or --memory-convention's
    buffers: float = 0.0  #: communication buffers: DDP/DeepSpeed buckets, gathered FSDP units, pipeline
    stage: str = ""  #: which pipeline stage these bytes are for (the one with the most)
    #: share of ``capacity`` a plan may fill (``--memory-fraction``, the planner's rule too)
    fraction: float = 1.0
    master: float = 0.0  #: fp32 master weights
    workspace: float = 0.0  #: cuBLAS workspace, autocast's 16-bit weight copies
    step: float = 0.0  #: optimizer-step temporaries (when the activations are gone)
    context: float = 0.0  #: CUDA context (outside PyTorch's allocator)
    nccl: float = 0.0  #: NCCL's buffers (outside PyTorch's allocator)
    framework: str = ""  #: megatron, fsdp, deepspeed, ddp
    reserved_ratio: float = RESERVED_RATIO  #: reserved peak / allocated peak (nvidia-smi)

    @property
    def limit(self) -> float:
        """Bytes a plan may use: ``fraction x capacity``."""
        return self.fraction * self.capacity

    @property
    def state(self) -> float:
        return self.weights + self.gradients + self.master + self.optimizer

    @property
    def allocated(self) -> float:
        """PyTorch's peak, ``torch.cuda.max_memory_allocated`` (known parts only)."""
        during = (self.activations or 0.0) + self.buffers + self.workspace
        return self.state + max(during, self.step)

    @property
    def total(self) -> float:
        """What the GPU must hold: the allocated peak, the CUDA context and NCCL (known parts
        only: a lower bound when ``activations`` is None)."""
        return self.allocated + self.context + self.nccl

    @property
    def reserved(self) -> float:
        """What the caching allocator typically reserves at this peak (``reserved_ratio x
        allocated``, memory.device)."""
        return self.reserved_ratio * self.allocated

    @property
    def device(self) -> float:
        """What nvidia-smi would show: the allocator's reserved peak (which it gives back under
        pressure: never more than the GPU leaves it), the context and NCCL."""
        other = self.context + self.nccl
        return min(self.reserved, max(self.capacity - other, self.allocated)) + other

    @property
    def headroom(self) -> float:
        """``limit - total``: negative when it does not fit."""
        return self.limit - self.total

    @property
    def verdict(self) -> str | None:
        """"fits" (the typical reserve fits too), "tight" (the allocated peak fits, the typical
        reserve does not) or "does not fit"; None when unknown parts could still exceed the
        limit (memory.device)."""
        if self.total > self.limit:
            return "does not fit"
        if self.activations is None:
            return None
        return "tight" if self.reserved + self.context + self.nccl > self.limit else "fits"

    @property
    def fits(self) -> bool | None:
        """True (fits or tight), False (does not fit), or None when unknown parts could exceed it."""
        verdict = self.verdict
        return None if verdict is None else verdict != "does not fit"

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict, "framework": self.framework,
            "weights_bytes": self.weights, "gradients_bytes": self.gradients,
            "master_bytes": self.master, "optimizer_bytes": self.optimizer,
            "activations_bytes": self.activations, "buffers_bytes": self.buffers,
            "workspace_bytes": self.workspace, "optimizer_step_bytes": self.step,
            "allocated_bytes": self.allocated, "cuda_context_bytes": self.context,
            "nccl_bytes": self.nccl, "total_bytes": self.total,
            "reserved_bytes": self.reserved, "headroom_bytes": self.headroom,
            "nvidia_smi_bytes": self.device, "capacity_bytes": self.capacity,
            "limit_bytes": self.limit, "memory_fraction": self.fraction,
            "complete": self.activations is not None, "fits": self.fits,
            "convention": self.convention, "stage": self.stage,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class CommReport:
    """One kind of communication a step issues, with its cost and what it crosses."""

    name: str  #: e.g. "DDP gradient all-reduce"
    op: str  #: collective (all_reduce, ...)
    group: str  #: which ranks ("data parallel, 32 GPUs on 4 nodes")
    ranks: int
    bytes: float  #: per GPU per step (the whole message, as nccl-tests sizes it)
    calls: int  #: collectives issued per step (buckets)
    time: float  #: seconds on the communication stream
    exposed: float  #: of which not hidden behind compute
    links: tuple[str, ...]  #: the links the transfers cross, slowest last
    algorithm: str  #: what runs, e.g. "ring (NCCL)"
    why: str  #: why that algorithm / where the time goes
    parallelism: str = "dp"  #: dp, tp, pp, cp, ep, zero (which parallelism issues it)
    leaves_node: bool = False  #: its group spans nodes (traffic crosses the NICs)
    placement: str = ""  #: where the group sits (nodes, GPUs per node, rail)

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "parallelism": self.parallelism, "op": self.op,
                "group": self.group, "ranks": self.ranks, "size_bytes": self.bytes,
                "calls": self.calls, "time_s": self.time, "exposed_s": self.exposed,
                "links": list(self.links), "leaves_node": self.leaves_node,
                "placement": self.placement, "algorithm": self.algorithm, "why": self.why}


@dataclass(frozen=True, slots=True, kw_only=True)
class Bottleneck:
    """The resource busiest during a step, why, and what would change the verdict."""

    #: "compute", "inter-node network", "intra-node network", "storage", "out of memory"
    resource: str
    reason: str  #: one line with the numbers
    fixes: tuple[str, ...] = ()  #: least changes that would flip the verdict, computed
    #: seconds each resource is busy per step: compute (forward + backward), communication
    #: (the communication streams), storage
    busy: tuple[tuple[str, float], ...] = ()
    #: exposed parts over the step time: communication, data_loading, bubble (the criterion)
    shares: tuple[tuple[str, float], ...] = ()
    level: str | None = None  #: the limiting link level: intra, inter, measured (None: none)

    def to_json(self) -> dict[str, Any]:
        return {"resource": self.resource, "reason": self.reason, "fixes": list(self.fixes),
                "busy_s": dict(self.busy), "exposed_share": dict(self.shares),
                "limiting_link": self.level}


@dataclass(frozen=True, slots=True, kw_only=True)
class StepEstimate:
    """One optimizer step of a training job: time, breakdown, throughput, memory, bottleneck."""

    step_time: float
    breakdown: Breakdown
    compute: float  #: forward + backward (incl. recomputation) without overlap slowdown
    comms: float  #: total communication time per step (the communication stream's busy time)
    exposed_comms: float  #: part of ``comms`` not hidden behind compute
    model_flops: float  #: per GPU per step (no recomputation): what MFU counts
    executed_flops: float  #: per GPU per step, recomputation included: what HFU counts
    peak_flops: float  #: the GPU's dense peak for the compute dtype
    mfu: float  #: model_flops / (step_time x peak): PaLM-style, causal attention counted in full
    hfu: float  #: executed_flops / (step_time x peak)
    tokens_per_s: float  #: whole job
    samples_per_s: float
    global_batch: int
    tokens_per_step: int
    params: float
    gpus: int
    nodes: int
    memory: MemoryBreakdown
    comm_ops: tuple[CommReport, ...]
    bottleneck: Bottleneck
    assumptions: tuple[tuple[str, str], ...]  #: (what, value and why)
    unknowns: tuple[str, ...]  #: what could not be computed from the inputs, and why
    #: the step's timeline (:attr:`timeline`), a Timeline or a :class:`Deferred` one made when
    #: first read
    timeline_source: Timeline | Deferred
    plan: dict = field(default_factory=dict)  #: the plan's degrees and schedule
    pipeline: dict = field(default_factory=dict)  #: schedule, stages, micro-batches, bubble
    placement: tuple = ()  #: one dict per group kind: ranks, nodes, GPUs per node, rail, link
    warnings: tuple[str, ...] = ()  #: plan choices worth a second look (TP across nodes, ...)
    #: MFU with causal attention counted for its unmasked half (the FLOPs a causal kernel needs)
    mfu_causal: float = 0.0
    #: compute per op kind (per-op model); None when a flat efficiency times compute
    compute_kinds: ComputeKinds | None = None
    #: how compute was timed: "per-op model" or the flat efficiency in words
    compute_model: str = ""
    #: the unstated knobs the estimate fitted (estimation.fit.KnobFit.to_json), {} when none
    knobs: dict = field(default_factory=dict)
    #: ``--network flow``: each group's simulation on the fabric (step.flow_network); None:
    #: the analytic network
    network: dict | None = None

    @property
    def timeline(self) -> Timeline:
        """The step's timeline (made on first use when the estimate deferred it)."""
        source = self.timeline_source
        return source.get() if isinstance(source, Deferred) else source

    @property
    def memory_per_gpu(self) -> float:
        return self.memory.total

    @property
    def tflops_per_gpu(self) -> float:
        """Model FLOP/s per GPU over the whole step, in TFLOP/s (what MFU counts)."""
        return self.model_flops / self.step_time / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> float:
        """Executed FLOP/s per GPU incl. recomputation, in TFLOP/s: Megatron-LM's and BLOOM's
        "achieved TFLOP/s" (what HFU counts)."""
        return self.executed_flops / self.step_time / 1e12

    def traffic(self) -> list[dict[str, Any]]:
        """Per parallelism: group, op, bytes, link, time and exposed time per step."""
        out = []
        for c in self.comm_ops:
            out.append({"parallelism": c.parallelism, "name": c.name, "op": c.op, "group": c.group,
                        "ranks": c.ranks, "bytes_per_step": c.bytes, "calls": c.calls,
                        "link": c.links[-1] if c.links else "", "leaves_node": c.leaves_node,
                        "time_s": c.time, "exposed_s": c.exposed})
        return out

    @property
    def scaling_verdict(self) -> bool:
        """The handbook's column "comms is a bottleneck", by the estimate's criterion: the
        bottleneck is a network (exposed communication above 5% of the step)."""
        return self.bottleneck.resource.endswith("network")

    def to_json(self) -> dict[str, Any]:
        return {
            "step_time_s": self.step_time,
            "compute_s": self.compute,
            "comms_s": self.comms,
            "exposed_comms_s": self.exposed_comms,
            "hidden_comms_s": self.comms - self.exposed_comms,
            "mfu": self.mfu,
            "mfu_palm": self.mfu,
            "mfu_causal_adjusted": self.mfu_causal,
            "hfu": self.hfu,
            "compute_model": self.compute_model,
            "compute_by_kind": (self.compute_kinds.to_json() if self.compute_kinds is not None
                                else None),
            "tokens_per_s": self.tokens_per_s,
            "samples_per_s": self.samples_per_s,
            "memory_per_gpu_bytes": self.memory.total,
            "bottleneck": self.bottleneck.resource,
            "bottleneck_reason": self.bottleneck.reason,
            "fixes": list(self.bottleneck.fixes),
            "comms_is_bottleneck": self.scaling_verdict,
            "breakdown_s": self.breakdown.to_json(),
            "busy_s": dict(self.bottleneck.busy),
            "exposed_share": dict(self.bottleneck.shares),
            "limiting_link": self.bottleneck.level,
            "model_flops_per_gpu": self.model_flops,
            "executed_flops_per_gpu": self.executed_flops,
            "peak_flop_per_s": self.peak_flops,
            "global_batch": self.global_batch,
            "tokens_per_step": self.tokens_per_step,
            "params": self.params,
            "gpus": self.gpus,
            "nodes": self.nodes,
            "memory": self.memory.to_json(),
            "comm_ops": [c.to_json() for c in self.comm_ops],
            "assumptions": [{"what": k, "value": v} for k, v in self.assumptions],
            "unknowns": list(self.unknowns),
            "timeline": self.timeline.to_json(),
            "bubble_s": self.breakdown.bubble,
            "tflops_per_gpu": self.tflops_per_gpu,
            "hardware_tflops_per_gpu": self.hardware_tflops_per_gpu,
            "plan": dict(self.plan),
            "pipeline": dict(self.pipeline),
            "traffic": self.traffic(),
            "placement": [dict(p) for p in self.placement],
            "warnings": list(self.warnings),
            "knobs": dict(self.knobs),
            "network": self.network,
        }

    def __repr__(self) -> str:
        fits = self.memory.verdict or "fit unknown"
        return (f"StepEstimate(step {format_time(self.step_time)}, MFU {self.mfu:.1%}, "
                f"{format_count(self.tokens_per_s)} tokens/s on {self.gpus} GPUs, "
                f"{format_size(self.memory.total, binary=True)}/GPU ({fits}), "
                f"bottleneck: {self.bottleneck.resource})")

    def _repr_html_(self) -> str:
        """A table of the headline numbers and the step's breakdown, for notebooks."""
        b = self.breakdown
        rows = [("step time", format_time(self.step_time)), ("MFU", f"{self.mfu:.1%}"),
                ("tokens/s", format_count(self.tokens_per_s)), ("GPUs", f"{self.gpus} on {self.nodes} nodes"),
                ("memory per GPU", f"{format_size(self.memory.total, binary=True)} of "
                                   f"{format_size(self.memory.limit, binary=True)} allowed"),
                ("bottleneck", self.bottleneck.resource), ("why", self.bottleneck.reason)]
        rows += [(f"  {f.name.replace('_', ' ')}", format_time(getattr(b, f.name)))
                 for f in fields(b) if getattr(b, f.name)]
        return html_table("StepEstimate", ("", "value"), rows)
