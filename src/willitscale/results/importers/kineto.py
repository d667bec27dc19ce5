"""A PyTorch profiler (Kineto) trace, the Chrome trace JSON ``torch.profiler`` exports, read into
what a training step did (pure: parsed JSON in, a :class:`TraceSummary` out).

What is read, from which events (``traceEvents``; ``ts`` and ``dur`` in microseconds):

* **steps**: the ``ProfilerStep#N`` annotations ``prof.step()`` records under a profiler
  schedule; a trace without them is one step spanning its events.
* **collectives**: NCCL kernels (``cat`` ``kernel``, names ``ncclKernel_*``/``ncclDevKernel_*``)
  with the communication arguments PyTorch attaches (``Collective name``, ``In msg nelems``,
  ``Out msg nelems``, ``dtype``, ``Group size``), and Gloo's ``gloo:<op>`` annotations, which
  run on Gloo's own threads and carry the tensor's ``Input Dims`` and ``Input type``. Sizes follow
  nccl-tests: the whole buffer (all_gather's output, reduce_scatter's input). A collective whose
  size cannot be known (a Gloo all_gather's annotation shows one rank's tensor or the list, not
  verified here) is reported and left out; the rest are kept.
* **compute by kind**: each compute event's *self* time (its duration minus the events nested in
  it on the same thread or stream), classified by name: ``gemm`` (matrix products), ``attention``
  (flash/fused attention kernels, ``scaled_dot_product``), ``optimizer`` (inside an
  ``Optimizer.step#`` annotation, or fused optimizer kernels) and ``elementwise`` (the rest: on a
  CPU trace this includes the framework's own time between kernels). On a trace with GPU kernels
  only kernels count; on a CPU trace the ``cpu_op`` events do.
* **overlap**: the part of the collectives' time (the union of their intervals) during which
  compute also ran; ``exposed = comms - overlap``.
"""

from __future__ import annotations

import bisect
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError
from willitscale.results.exchange import Problem

__all__ = ["TraceCollective", "TraceStep", "TraceSummary", "read_trace", "KINDS", "DTYPE_BYTES"]

US = 1e-6
KINDS = ("gemm", "attention", "elementwise", "optimizer")
#: the profiler's type names (``Input type``, ``dtype``) -> (torch's name, bytes per element)
DTYPE_BYTES = {"float": ("float32", 4), "Float": ("float32", 4), "double": ("float64", 8),
               "Double": ("float64", 8), "c10::Half": ("float16", 2), "Half": ("float16", 2),
               "c10::BFloat16": ("bfloat16", 2), "BFloat16": ("bfloat16", 2),
               "long int": ("int64", 8), "Long": ("int64", 8), "int": ("int32", 4),
               "Int": ("int32", 4), "signed char": ("int8", 1), "Char": ("int8", 1),
               "unsigned char": ("uint8", 1), "Byte": ("uint8", 1),
               "c10::Float8_e4m3fn": ("float8_e4m3", 1), "Float8_e4m3fn": ("float8_e4m3", 1)}
_GEMM = re.compile(r"gemm|cutlass|cublas|xmma|wgmma|matmul|aten::(mm|addmm|bmm|baddbmm|_scaled_mm|"
                   r"addmv|mv|dot|linear)$", re.I)
_ATTENTION = re.compile(r"flash|fmha|attention|sdpa|scaled_dot_product", re.I)
_FUSED_OPTIMIZER = re.compile(r"multi_tensor_apply|adam|_fused_sgd|optimizer", re.I)
_NCCL_KERNEL = re.compile(r"^nccl(Dev)?Kernel_(?P<op>AllReduce|AllGather|ReduceScatter|Broadcast|"
                          r"Reduce|AllToAll|SendRecv|Send|Recv)", re.I)
#: collective names (a kernel's op, ``Collective name``, ``gloo:<op>``) without "_", lower case
_OPS = {"allreduce": Op.ALL_REDUCE, "allgather": Op.ALL_GATHER, "allgatherbase": Op.ALL_GATHER,
        "allgatherintotensorcoalesced": Op.ALL_GATHER, "reducescatter": Op.REDUCE_SCATTER,
        "reducescatterbase": Op.REDUCE_SCATTER, "reducescattertensorcoalesced": Op.REDUCE_SCATTER,
        "broadcast": Op.BROADCAST, "reduce": Op.REDUCE, "alltoall": Op.ALL_TO_ALL,
        "alltoallv": Op.ALL_TO_ALL, "alltoallbase": Op.ALL_TO_ALL, "sendrecv": Op.SEND_RECV,
        "send": Op.SEND_RECV, "recv": Op.SEND_RECV}
#: Gloo ops whose annotation's first input is the whole buffer nccl-tests would size
_GLOO_WHOLE = (Op.ALL_REDUCE, Op.BROADCAST, Op.REDUCE)


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceCollective:
    """One collective the trace recorded."""

    op: Op
    size_bytes: int | None  #: nccl-tests' size: the whole buffer (None: the trace does not say)
    count: int | None  #: elements of that buffer
    dtype: str
    ranks: int | None  #: the group's size (None when the trace does not say)
    group: str  #: the process group's name, when recorded
    start: float  #: seconds from the trace's first event
    duration: float  #: seconds
    name: str  #: the event's name
    step: int | None = None  #: index into :attr:`TraceSummary.steps`


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceStep:
    """One profiled step: its length, compute self-time by kind, communication and overlap."""

    name: str
    start: float
    duration: float
    compute: Mapping[str, float] = field(default_factory=dict)  #: kind -> seconds
    comms: float = 0.0  #: union of the collectives' intervals in the step
    overlap: float = 0.0  #: of which compute ran too

    @property
    def exposed_comms(self) -> float:
        return self.comms - self.overlap

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "duration_s": self.duration,
                "compute_s": {k: self.compute.get(k, 0.0) for k in KINDS},
                "comms_s": self.comms, "overlap_s": self.overlap, "exposed_comms_s": self.exposed_comms}


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceSummary:
    """What :func:`read_trace` found in one trace file."""

    file: str
    backend: str  #: from ``distributedInfo`` ("" when absent)
    rank: int | None
    world_size: int | None
    devices: tuple[str, ...]  #: GPU names of ``deviceProperties``; () on a CPU trace
    host: str
    steps: tuple[TraceStep, ...]
    collectives: tuple[TraceCollective, ...]
    problems: tuple[Problem, ...] = ()


@dataclass(slots=True)
class _Event:
    index: int
    name: str
    cat: str
    tid: object
    start: float  #: microseconds
    end: float
    args: Mapping[str, Any]


def _events(data: Any, file: str) -> tuple[list[_Event], list[Problem], dict]:
    if isinstance(data, list):
        raw, meta = data, {}
    elif isinstance(data, dict) and isinstance(data.get("traceEvents"), list):
        raw, meta = data["traceEvents"], data
    else:
        raise ConfigError("TRACE", file, "a Chrome/Kineto trace: a JSON object with a "
                                         "'traceEvents' list (torch.profiler's export_chrome_trace)")
    events, problems = [], []
    for i, e in enumerate(raw):
        if not isinstance(e, dict) or e.get("ph") != "X":
            continue  # metadata, counters, flows: not durations
        try:
            start, dur = float(e["ts"]), float(e.get("dur", 0.0))
            if not (math.isfinite(start) and math.isfinite(dur) and dur >= 0):
                raise ValueError("ts/dur not finite numbers >= 0")
            args = e.get("args") or {}
            if not isinstance(args, dict):
                raise ValueError("'args' is not an object")
            events.append(_Event(i, str(e.get("name", "")), str(e.get("cat", "")), e.get("tid"),
                                 start, start + dur, args))
        except (KeyError, TypeError, ValueError) as exc:
            problems.append(Problem(file=file, line=i, message=f"traceEvents[{i}]: a complete "
                                    f"event ('ph': 'X') needs numeric 'ts' and 'dur' ({exc})"))
    return events, problems, meta


def _op(name: str) -> Op | None:
    return _OPS.get(name.lower().replace("_", "").replace(":", ""))


def _collective(e: _Event, file: str, ranks: int | None
                ) -> tuple[TraceCollective | None, Problem | None]:
    """The collective an event records (None: not one) and a Problem when part of it is
    unknown: a collective without a size still counts for time and overlap, but is no row."""
    kernel = _NCCL_KERNEL.match(e.name) if e.cat == "kernel" else None
    if not (kernel or e.name.startswith("gloo:")):
        return None, None
    op = _op(str(e.args.get("Collective name", ""))) or _op(kernel["op"] if kernel else e.name[5:])
    where = f"traceEvents[{e.index}] ({e.name})"
    if op is None:
        return None, Problem(file=file, line=e.index, message=f"{where}: a collective willitscale "
                                                              "does not model")
    size, problem = _size(e, op, kernel is not None)
    group = str(e.args.get("Process Group Name", e.args.get("Process Group Description", "")))
    if kernel and e.args.get("Group size") not in (None, ""):
        ranks = int(e.args["Group size"])
    count, dtype, width = size or (None, "", 0)
    found = TraceCollective(op=op, size_bytes=None if count is None else count * width, count=count,
                            dtype=dtype, ranks=ranks, group=group, start=e.start,
                            duration=(e.end - e.start) * US, name=e.name)
    return found, None if problem is None else Problem(file=file, line=e.index,
                                                       message=f"{where}: {problem}")


def _size(e: _Event, op: Op, kernel: bool) -> tuple[tuple[int, str, int] | None, str | None]:
    """``((count, dtype, bytes per element), None)``, or ``(None, why not)``."""
    if not kernel and op not in _GLOO_WHOLE:
        return None, (f"the size a Gloo {op.value} annotation records is not the whole buffer: "
                      "timed, not stored as a row")
    try:
        if kernel:
            dtype, width = DTYPE_BYTES[str(e.args["dtype"])]
            count = int(e.args["Out msg nelems" if op is Op.ALL_GATHER else "In msg nelems"])
        else:
            dtype, width = DTYPE_BYTES[str(e.args["Input type"][0])]
            count = math.prod(int(d) for d in e.args["Input Dims"][0])
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        needs = "dtype and In/Out msg nelems" if kernel else \
            "Input type and Input Dims: record with torch.profiler.profile(record_shapes=True)"
        return None, f"no size in its arguments ({needs}; missing or unreadable: {exc}): " \
                     "timed, not stored as a row"
    return (count, dtype, width), None


def _kind(e: _Event, optimizer: dict[object, tuple[list[float], list[float]]]) -> str:
    if e.cat != "kernel":
        starts, ends = optimizer.get(e.tid, ([], []))
        i = bisect.bisect_right(starts, e.start) - 1
        if i >= 0 and e.end <= ends[i]:
            return "optimizer"
    elif _FUSED_OPTIMIZER.search(e.name):
        return "optimizer"
    if _ATTENTION.search(e.name):
        return "attention"
    return "gemm" if _GEMM.search(e.name) else "elementwise"


#: seconds: events that touch within this are back to back, not nested (a trace's microsecond
#: timestamps, summed from a step's offset and a span's start, differ in their last bits)
NEST_TOLERANCE = 1e-9


def _self_times(events: Sequence[_Event]) -> list[float]:
    """Each event's duration minus its children's (events nested in it on its thread: starting
    inside it and ending inside it)."""
    order = sorted(range(len(events)), key=lambda i: (str(events[i].tid), events[i].start,
                                                      -events[i].end))
    own = [e.end - e.start for e in events]
    stack: list[int] = []
    for i in order:
        e = events[i]
        while stack and (str(events[stack[-1]].tid) != str(e.tid)
                         or events[stack[-1]].end <= e.start + NEST_TOLERANCE
                         or e.end > events[stack[-1]].end + NEST_TOLERANCE):
            stack.pop()
        if stack:
            own[stack[-1]] -= e.end - e.start
        stack.append(i)
    return [max(t, 0.0) for t in own]


def _union(intervals: list[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], b))
        else:
            merged.append((a, b))
    return merged


def _length(union: list[tuple[float, float]], lo: float, hi: float) -> float:
    return sum(max(0.0, min(b, hi) - max(a, lo)) for a, b in union)


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]], lo: float, hi: float) -> float:
    total, j = 0.0, 0
    for x0, x1 in a:
        while j < len(b) and b[j][1] <= x0:
            j += 1
        k = j
        while k < len(b) and b[k][0] < x1:
            total += max(0.0, min(x1, b[k][1], hi) - max(x0, b[k][0], lo))
            k += 1
    return total


def _is_compute(e: _Event, kernels: bool) -> bool:
    if kernels:  # an NCCL kernel is never compute, modelled op or not
        return e.cat == "kernel" and not e.name.lower().startswith("nccl")
    return e.cat == "cpu_op" and not e.name.startswith(("c10d::", "gloo:", "nccl:", "record_param_comms"))


def read_trace(data: Any, file: str, *, ranks: int | None = None) -> TraceSummary:
    """A :class:`TraceSummary` of parsed trace JSON ``data`` read from ``file``; ``ranks`` is the
    group size to assume where the trace does not record one."""
    events, problems, meta = _events(data, file)
    info = meta.get("distributedInfo") or {}
    world = info.get("world_size")
    ranks = ranks or (int(world) if isinstance(world, int) else None)
    collectives, compute = [], []
    kernels = any(e.cat == "kernel" for e in events)
    for e in events:
        found, problem = _collective(e, file, ranks)
        if problem is not None:
            problems.append(problem)
        if found is not None:
            collectives.append(found)
        elif problem is None and _is_compute(e, kernels):
            compute.append(e)
    if not events:
        raise ConfigError("TRACE", file, "a trace with complete events ('ph': 'X'); it has none")
    origin = min(e.start for e in events)
    marks = sorted((e for e in events if e.name.startswith("ProfilerStep#")), key=lambda e: e.start)
    bounds = [(m.name, m.start, m.end) for m in marks] or [("trace", origin, max(e.end for e in events))]
    optimizer: dict[object, tuple[list[float], list[float]]] = {}
    for e in sorted(events, key=lambda e: e.start):
        if e.name.startswith("Optimizer.step#"):
            starts, ends = optimizer.setdefault(e.tid, ([], []))
            starts.append(e.start)
            ends.append(e.end)
    own = _self_times(compute)
    comm_union = _union([(c.start, c.start + c.duration / US) for c in collectives])
    compute_union = _union([(e.start, e.end) for e in compute])
    steps = []
    for name, lo, hi in bounds:
        by_kind = dict.fromkeys(KINDS, 0.0)
        for e, t in zip(compute, own):
            if lo <= e.start < hi:
                by_kind[_kind(e, optimizer)] += t * US
        steps.append(TraceStep(name=name, start=(lo - origin) * US, duration=(hi - lo) * US,
                               compute=by_kind, comms=_length(comm_union, lo, hi) * US,
                               overlap=_overlap(comm_union, compute_union, lo, hi) * US))
    placed = []
    for c in collectives:
        step = next((i for i, (_, lo, hi) in enumerate(bounds) if lo <= c.start < hi), None)
        placed.append(replace(c, start=(c.start - origin) * US, step=step))
    devices = tuple(str(d.get("name", "")) for d in meta.get("deviceProperties") or ()
                    if isinstance(d, dict))
    return TraceSummary(file=file, backend=str(info.get("backend", "")),
                        rank=info.get("rank") if isinstance(info.get("rank"), int) else None,
                        world_size=world if isinstance(world, int) else None, devices=devices,
                        host=str(meta.get("host_name", "")), steps=tuple(steps),
                        collectives=tuple(sorted(placed, key=lambda c: c.start)),
                        problems=tuple(problems))
