"""The planner: enumerate parallel plans, reject the impossible by reason, rank the rest.

For a model, a cluster of ``N`` GPUs and a global batch ``B``, every combination of

* ``tp``, ``pp``, ``cp`` among the divisors of ``N`` (``dp = N / (tp pp cp)``), ``ep`` among
  the divisors of the expert count that divide ``dp``;
* ZeRO stage 0-3 (and FSDP hybrid sharding for stage 3), micro-batch (divisors of ``B / dp`` up
  to :attr:`SearchSpace.max_micro_batch`), recomputation none / selective / full;
* pipeline schedule GPipe, 1F1B or interleaved 1F1B with ``v`` virtual stages, sequence
  parallelism on or off when ``tp > 1``

is a candidate. Candidates are built and evaluated as numpy arrays
(:class:`~willitscale.scenario.batch.PlanBatch`): the structural reasons of
:mod:`willitscale.scenario.validate` first, then memory (the engine's memory part only), then the
full step-time model for the plans that fit, in chunks. Memory must stay under
``memory_fraction`` of the GPU's HBM (default 1: the CUDA context, NCCL buffers and the
allocator's reserve are counted, memory.device). Plans are ranked by predicted throughput (the
global batch is fixed, so by step time).

With ``--network flow`` the sweep runs on the analytic network (simulating the fabric for
every distinct geometry of a sweep would take minutes); the :data:`FLOW_TOP` best plans are then
re-estimated with every group simulated on the fabric (:mod:`willitscale.step.flow_network`)
and re-ranked among themselves ahead of the rest. The result says so
(``extra["network"]``).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from willitscale.errors import ConfigError
from willitscale.hardware.model import MAX_GPUS
from willitscale.memory.device import verdict_codes
from willitscale.memory.frameworks import FRAMEWORK_STAGES, FRAMEWORKS, framework_index
from willitscale.memory.stage import DEFAULT_MEMORY_FRACTION
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.validate import CODE, REASONS, structural_reasons
from willitscale.step.engine import make_context
from willitscale.step.evaluate import run
from willitscale.step.network import AnalyticNetwork
from willitscale.topology.placement import DEFAULT_ORDER, group_placement
from willitscale.workload.recompute import RERUN_SETS, parse_recompute

__all__ = ["SearchSpace", "SearchResult", "candidate_plans", "search", "search_plans"]

MAX_TP = 64
#: the largest cluster the search plans for (hardware.model.MAX_GPUS). Awkward sizes (a prime
#: number of nodes) place every rank of each distinct geometry once, O(GPUs) memory: 1,000,000
#: and 1,048,568 GPUs peaked at 0.21 GB RSS (llama3-8b, /usr/bin/time -v).
MAX_CP = 16


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def _check_values(name: str, values, least: int, expected: str) -> None:
    if values is None:
        return
    if not values or any(isinstance(v, bool) or int(v) != v or v < least for v in values):
        raise ConfigError(name, ",".join(map(str, values)) if values else "(none)", expected)


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchSpace:
    """Which values each plan field may take (None: the defaults in the module docstring)."""

    tp: tuple[int, ...] | None = None
    pp: tuple[int, ...] | None = None
    cp: tuple[int, ...] | None = None
    ep: tuple[int, ...] | None = None
    zero: tuple[int, ...] = (0, 1, 2, 3)
    hybrid: bool = True  #: also FSDP hybrid sharding for ZeRO-3
    recompute: tuple[str, ...] = ("none", "selective", "full")  #: modes (workload.recompute)
    schedules: tuple[str, ...] = ("gpipe", "1f1b", "interleaved")
    virtual_stages: tuple[int, ...] = (2, 4)
    sequence_parallel: tuple[bool, ...] = (False, True)
    max_micro_batch: int = 16
    memory_fraction: float = DEFAULT_MEMORY_FRACTION
    allow_tp_across_nodes: bool = False
    #: one framework for every plan (its ZeRO stages only); None: what each plan implies
    framework: str | None = None

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "cp", "ep"):
            _check_values(name, getattr(self, name), 1, "integers >= 1")
        _check_values("virtual_stages", self.virtual_stages, 2,
                      "integers >= 2 (model chunks per stage of the interleaved schedule)")
        bad = [z for z in self.zero if z not in (0, 1, 2, 3)]
        if bad or not self.zero:
            raise ConfigError("zero", ",".join(map(str, self.zero)), "ZeRO stages from 0, 1, 2, 3")
        if not 0 < self.memory_fraction <= 1:
            raise ConfigError("memory_fraction", self.memory_fraction, "a fraction in (0, 1]")
        if self.max_micro_batch < 1:
            raise ConfigError("max_micro_batch", self.max_micro_batch, "an integer >= 1")
        if self.framework is not None:
            framework_index(self.framework)
            if not set(self.zero) & set(FRAMEWORK_STAGES[self.framework]):
                raise ConfigError("zero", ",".join(map(str, self.zero)),
                                  f"stages {self.framework} has: "
                                  + ", ".join(map(str, FRAMEWORK_STAGES[self.framework])))

    @property
    def stages(self) -> tuple[int, ...]:
        """The ZeRO stages searched: all asked for, or those the framework has."""
        if self.framework is None:
            return self.zero
        return tuple(z for z in self.zero if z in FRAMEWORK_STAGES[self.framework])


@dataclass(frozen=True, slots=True, kw_only=True)
class SearchResult:
    """Every candidate with its fate; the feasible ones ranked (index into ``batch``)."""

    batch: PlanBatch  #: all candidates
    reason: np.ndarray  #: code per candidate (0 = feasible), see validate.REASONS
    memory: np.ndarray  #: bytes per GPU (NaN where not computed: structurally invalid)
    step_time: np.ndarray  #: seconds (NaN where not feasible)
    tflops: np.ndarray  #: model TFLOP/s per GPU
    hardware_tflops: np.ndarray
    bubble: np.ndarray
    exposed: np.ndarray
    compute: np.ndarray  #: forward + backward of the critical stage (seconds per step)
    ranked: np.ndarray  #: indices of feasible candidates, fastest first
    capacity: float
    seconds: float  #: wall time of the search
    interrupted: bool = False
    global_batch: int = 0
    seq_len: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def evaluated(self) -> int:
        return len(self.batch)

    def rejected(self) -> dict[str, int]:
        counts = np.bincount(self.reason, minlength=len(REASONS))
        return {REASONS[i][0]: int(c) for i, c in enumerate(counts) if i and c}

    @property
    def plans_per_second(self) -> float:
        return self.evaluated / self.seconds if self.seconds > 0 else float("inf")

    def row(self, index: int) -> dict:
        """Candidate ``index``: its plan, its fate (``reason``: "" when feasible) and, when it
        was timed, its numbers (NaN otherwise), keys with units as in ``plan --json``."""
        plan, step = self.batch.plan(index), float(self.step_time[index])
        peak = self.extra.get("peak", float("nan"))
        tokens = self.global_batch * self.seq_len
        return {
            "dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "cp": plan.cp, "ep": plan.ep,
            "zero": plan.zero, "shard_scope": plan.shard_scope, "micro_batch": plan.micro_batch,
            "grad_accum": plan.grad_accum, "recompute": plan.recompute,
            "pp_schedule": plan.pp_schedule, "virtual_stages": plan.virtual_stages,
            "sequence_parallel": plan.sequence_parallel,
            "reason": REASONS[int(self.reason[index])][0] if self.reason[index] else "",
            "step_time_s": step, "tokens_per_s": tokens / step,
            "tflops_per_gpu": float(self.tflops[index]),
            "hardware_tflops_per_gpu": float(self.hardware_tflops[index]),
            "mfu": float(self.tflops[index]) * 1e12 / peak,
            "hfu": float(self.hardware_tflops[index]) * 1e12 / peak,
            "memory_per_gpu_bytes": float(self.memory[index]),
            "memory_verdict": ("fits", "tight", "does not fit")[int(self.extra["verdict"][index])]
            if "verdict" in self.extra and np.isfinite(self.memory[index]) else None,
            "framework": plan.resolved_framework,
            "bubble_s": float(self.bubble[index]), "exposed_comms_s": float(self.exposed[index]),
        }

    def rows(self, *, top: int | None = None, feasible_only: bool = True) -> list[dict]:
        """:meth:`row` of the ranked plans, fastest first (the first ``top``), or of every
        candidate in enumeration order (``feasible_only=False``)."""
        order = self.ranked[:top] if feasible_only else np.arange(len(self.batch))[:top]
        return [self.row(int(i)) for i in order]

    def to_frame(self, *, top: int | None = None, feasible_only: bool = True):
        """:meth:`rows` as a pandas DataFrame (needs pandas: ``pip install 'willitscale[frame]'``)."""
        from willitscale.plan.frames import records_frame

        return records_frame(self.rows(top=top, feasible_only=feasible_only), "SearchResult.to_frame")

    def __repr__(self) -> str:
        rejected = ", ".join(f"{k} {v}" for k, v in self.rejected().items())
        best = (f"; best {self.batch.plan(int(self.ranked[0]))!r} at "
                f"{float(self.step_time[self.ranked[0]]):.4g} s") if self.ranked.size else ""
        return (f"SearchResult({self.evaluated} plans, {self.ranked.size} feasible"
                f"{'; rejected: ' + rejected if rejected else ''}{best}"
                f"{' (interrupted)' if self.interrupted else ''})")

    def _repr_html_(self) -> str:
        """The ten fastest plans as a table, for notebooks."""
        from willitscale.estimation.display import html_table

        head = ("tp", "pp", "dp", "cp", "ep", "zero", "micro_batch", "recompute", "step_time_s",
                "mfu", "memory_per_gpu_bytes")
        rows = [[f"{r[k]:.4g}" if isinstance(r[k], float) else r[k] for k in head]
                for r in self.rows(top=10)]
        return html_table(repr(self), head, rows)


def _grid(*arrays):
    mesh = np.meshgrid(*arrays, indexing="ij")
    return [m.reshape(-1) for m in mesh]


def _expand(rows: dict, values, name: str) -> dict:
    """Cartesian product of ``rows`` (dict of equal-length arrays) with one more field."""
    values = np.asarray(values)
    n = len(next(iter(rows.values())))
    out = {k: np.repeat(v, len(values)) for k, v in rows.items()}
    out[name] = np.tile(values, n)
    return out


def _keep(rows: dict, mask) -> dict:
    return {k: v[mask] for k, v in rows.items()}


def candidate_plans(*, gpus: int, global_batch: int, layers: int, experts: int,
                    space: SearchSpace, gpus_per_node: int | None = None,
                    order: tuple[str, ...] | None = None) -> tuple[PlanBatch, np.ndarray]:
    """Every candidate plan and a mask of those whose batch does not split over ``dp``.

    Plans that could only repeat another are left out: a ZeRO stage >= 1 when the gradient
    group (``cp x dp``) is one rank (nothing to shard: the same plan as ZeRO 0), and, given
    ``gpus_per_node``, hybrid sharding when the data-parallel group stays in one node (the
    same plan as full sharding)."""
    div = np.array(divisors(gpus))
    tp = np.array(space.tp) if space.tp else div[div <= MAX_TP]
    pp = np.array(space.pp) if space.pp else div[div <= layers]
    cp = np.array(space.cp) if space.cp else div[div <= MAX_CP]
    ep = np.array(space.ep) if space.ep else (np.array(divisors(experts)) if experts else np.array([1]))
    t, p, c, e = _grid(tp, pp, cp, ep)
    model = t * p * c
    ok = (gpus % model == 0)
    t, p, c, e = t[ok], p[ok], c[ok], e[ok]
    d = gpus // (t * p * c)
    ok = d % e == 0
    rows = {"tp": t[ok], "pp": p[ok], "cp": c[ok], "ep": e[ok], "dp": d[ok]}
    sched = {"gpipe": [(0, 1)], "1f1b": [(1, 1)], "interleaved": [(2, v) for v in space.virtual_stages]}
    options = np.array([o for s in space.schedules for o in sched[s]])
    rows = _expand(rows, np.arange(len(options)), "option")
    # one stage has no schedule: keep one copy, as 1F1B with one chunk
    rows = _keep(rows, (rows["pp"] > 1) | (rows["option"] == 0))
    rows["schedule"], rows["virtual_stages"] = options[rows["option"], 0], options[rows["option"], 1]
    single = rows["pp"] == 1
    rows["schedule"], rows["virtual_stages"] = np.where(single, 1, rows["schedule"]), np.where(
        single, 1, rows["virtual_stages"])
    del rows["option"]
    rows = _expand(rows, np.array(space.sequence_parallel, dtype=bool), "sequence_parallel")
    rows = _keep(rows, ~rows["sequence_parallel"] | (rows["tp"] > 1))
    rows = _expand(rows, np.arange(1, space.max_micro_batch + 1), "micro_batch")
    per_replica = global_batch // rows["dp"]
    bad = global_batch % rows["dp"] != 0
    rows = _keep(rows, np.where(bad, rows["micro_batch"] == 1, per_replica % rows["micro_batch"] == 0))
    rows["grad_accum"] = np.maximum(global_batch // (rows["dp"] * rows["micro_batch"]), 1)
    stages = space.stages
    zero = [(z, False) for z in stages] + ([(3, True)] if space.hybrid and 3 in stages else [])
    zopts = np.array(zero, dtype=np.int64)
    rows = _expand(rows, np.arange(len(zopts)), "zopt")
    rows["zero"], rows["shard_node"] = zopts[rows["zopt"], 0], zopts[rows["zopt"], 1].astype(bool)
    del rows["zopt"]
    rows = _keep(rows, (rows["zero"] == 0) | (rows["cp"] * rows["dp"] > 1)
                 | ((rows["zero"] == min(stages)) & ~rows["shard_node"]))
    if gpus_per_node is not None and np.any(rows["shard_node"]):
        spans = group_placement("dp", rows, gpus_per_node, order or DEFAULT_ORDER).nodes > 1
        rows = _keep(rows, ~rows["shard_node"] | spans)

    modes = [parse_recompute(r) for r in space.recompute]
    table = np.array([(RERUN_SETS.index(m.rerun), m.layers, m.every) for m in modes], dtype=np.int64)
    rows = _expand(rows, np.arange(len(modes)), "mode")
    rows["recompute"], rows["recompute_layers"], rows["recompute_every"] = (
        table[rows["mode"], 0], table[rows["mode"], 1], table[rows["mode"], 2])
    del rows["mode"]
    if space.framework is not None:
        rows["framework"] = FRAMEWORKS.index(space.framework)
    batch = PlanBatch.from_arrays(**rows)
    return batch, global_batch % batch.dp != 0


def search(scenario, *, gpus: int, global_batch: int, space: SearchSpace = SearchSpace(),
           chunk: int = 50_000, progress: Callable[[int, int], None] | None = None) -> SearchResult:
    """Search the plans of ``space`` for ``scenario``'s model and cluster (its plan is ignored)."""

    start = time.perf_counter()
    if isinstance(global_batch, bool) or not isinstance(global_batch, int) or global_batch < 1:
        raise ConfigError("global_batch", global_batch, "an integer >= 1 (samples per optimizer step)")
    if gpus != scenario.cluster.gpus:
        raise ConfigError(f"--gpus {gpus} but the cluster has {scenario.cluster.gpus} GPUs")
    if gpus > MAX_GPUS:
        raise ConfigError("gpus", gpus, f"at most {MAX_GPUS:,} (the planner's bound: it places the "
                                        "ranks of awkward cluster sizes one by one)")
    for name in ("tp", "pp", "cp"):
        bad = [v for v in getattr(space, name) or () if gpus % v]
        if bad:
            raise ConfigError(name, ",".join(map(str, bad)), f"divisors of the {gpus} GPUs")
    flow_ctx = make_context(scenario)
    ctx = flow_ctx if flow_ctx.network is None or not hasattr(flow_ctx.network, "plan_flow") else \
        replace(flow_ctx, network=AnalyticNetwork())
    terms = ctx.terms
    batch, bad_batch = candidate_plans(gpus=gpus, global_batch=global_batch, layers=terms.layers,
                                       experts=terms.experts, space=space,
                                       gpus_per_node=ctx.links.gpus_per_node,
                                       order=scenario.options.rank_order)
    reason = structural_reasons(batch.degrees(), terms, scenario.model,
                                gpus_per_node=ctx.links.gpus_per_node, seq_len=scenario.seq_len,
                                allow_tp_across_nodes=space.allow_tp_across_nodes,
                                order=scenario.options.rank_order)
    reason = np.where((reason == 0) & bad_batch, CODE["batch_not_divisible"], reason)
    n = len(batch)
    memory = np.full(n, np.nan)
    verdict = np.full(n, 2, dtype=np.int64)
    limit = space.memory_fraction * scenario.cluster.gpu.memory
    valid = np.nonzero(reason == 0)[0]
    for lo in range(0, valid.size, chunk * 4):
        idx = valid[lo:lo + chunk * 4]
        res = run(ctx, batch.take(idx), memory_only=True)
        memory[idx] = res.memory_per_gpu
        verdict[idx] = verdict_codes(res.allocated_per_gpu, res.memory.other, limit,
                                     res.memory.reserve)
    capacity = scenario.cluster.gpu.memory
    oom = (reason == 0) & (verdict == 2)
    reason = np.where(oom, CODE["out_of_memory"], reason)
    feasible = np.nonzero(reason == 0)[0]
    out = {k: np.full(n, np.nan) for k in ("step", "tflops", "hw", "bubble", "exposed", "compute")}
    interrupted, done = False, 0
    try:
        for lo in range(0, feasible.size, chunk):
            idx = feasible[lo:lo + chunk]
            res = run(ctx, batch.take(idx))
            out["step"][idx], out["tflops"][idx] = res.step_time, res.tflops_per_gpu
            out["hw"][idx], out["bubble"][idx] = res.hardware_tflops_per_gpu, res.bubble
            out["exposed"][idx], out["compute"][idx] = res.exposed_comms, res.compute
            done = lo + idx.size
            if progress is not None:
                progress(done, feasible.size)
    except KeyboardInterrupt:
        interrupted = True
    timed = feasible[:done]
    # the estimate's fit rule: plans that fit before tight ones, then the shortest step
    ranked = timed[np.lexsort((memory[timed], out["step"][timed], verdict[timed]))]
    note = ""
    if ctx is not flow_ctx and ranked.size:
        ranked, note = _flow_rerank(flow_ctx, batch, ranked, memory, verdict, out)
    return SearchResult(batch=batch, reason=reason, memory=memory, step_time=out["step"],
                        tflops=out["tflops"], hardware_tflops=out["hw"], bubble=out["bubble"],
                        exposed=out["exposed"], compute=out["compute"], ranked=ranked, capacity=capacity,
                        seconds=time.perf_counter() - start, interrupted=interrupted,
                        global_batch=global_batch, seq_len=scenario.seq_len,
                        extra={"memory_fraction": space.memory_fraction, "verdict": verdict,
                               "peak": ctx.peak, **({"network": note} if note else {})})


#: with ``--network flow``: the plans (best by the analytic sweep) re-estimated on the fabric.
#: A budget, not a measured constant: the table shows 10 plans by default (``--top``), and the
#: fabric can only slow a plan (never faster than analytic, docs/fabric.md), so plans below the
#: first few tens rarely climb into the shown ten; each distinct geometry among them costs one
#: set of simulations (~0.1-1 s at 1,024 GPUs), which keeps the re-ranking to seconds. A plan
#: outside it that the fabric would slow less is not seen: the output says which were simulated.
FLOW_TOP = 32


def _flow_rerank(flow_ctx, batch, ranked, memory, verdict, out):
    """The :data:`FLOW_TOP` best plans re-estimated with the simulated fabric, re-ranked among
    themselves ahead of the rest; ``out`` updated in place. Returns (ranking, what was done)."""
    top = ranked[:FLOW_TOP]
    res = run(flow_ctx, batch.take(top))
    out["step"][top], out["tflops"][top] = res.step_time, res.tflops_per_gpu
    out["hw"][top], out["bubble"][top] = res.hardware_tflops_per_gpu, res.bubble
    out["exposed"][top], out["compute"][top] = res.exposed_comms, res.compute
    top = top[np.lexsort((memory[top], out["step"][top], verdict[top]))]
    note = (f"{flow_ctx.network.describe()}: the {top.size} best plans of the analytic sweep "
            "re-estimated with every group simulated on the fabric and re-ranked; the rest "
            "keep the analytic network's figures")
    return np.concatenate([top, ranked[FLOW_TOP:]]), note


#: the public name of :func:`search`
search_plans = search
