"""The step-time model of any parallel plan: what a scenario's plans share (:class:`Context`)
and the arrays the engine returns (:class:`BatchResult`).

:func:`willitscale.step.evaluate.evaluate` takes a scenario (model, cluster, options) and a
:class:`~willitscale.scenario.batch.PlanBatch` and returns a :class:`BatchResult` of arrays, one
element per plan. The single-plan :func:`willitscale.estimation.estimate.estimate` calls it
with a batch of one and dresses the numbers in reports; the planner calls it with thousands. One step of the plan, on the GPU that finishes
last::

    step = data loading (not hidden)
         + pipeline        m x max_k T_k + bubble                  (:mod:`.pipeline`)
         + gradient tail   buckets still running after the last backward, minus the stage's
                           slack in the pipeline drain, + the tied-embedding all-reduce
         + ZeRO extras     ZeRO-2's per-micro-batch reduce-scatters not hidden, ZeRO-1/2's
                           weight all-gather not hidden by the next forward
         + overlap slowdown  s x communication hidden under compute
         + optimizer       fused AdamW over the stage's (sharded) parameters

with ``T_k`` = forward + backward compute of stage ``k`` per micro-batch + the exposed parts of
its tensor (:mod:`.tensor`), context (:mod:`.context`), expert (:mod:`.expert`) parallel
collectives, ZeRO-3 gathers (:mod:`.sharding`) and pipeline sends. With ``tp = pp = cp = ep = 1``
and ZeRO 0 this is exactly the data-parallel estimate of docs/estimate.md.

Compute per micro-batch: the per-op model (:mod:`willitscale.compute.model`: every GEMM, the
attention kernel and the memory-bound operations of a layer, the head and the embedding, timed
from their shapes) when the model's shape and the GPU's curves are known; otherwise (or with
``--hfu``/``--mfu``) executed FLOPs / (HFU x peak), or model FLOPs / (MFU x peak), split into
forward and backward in proportion to executed FLOPs.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from functools import lru_cache

import numpy as np

from willitscale.collectives.lines import ClusterLinks, cluster_links
from willitscale.compute.efficiency import Efficiency, resolved_efficiency
from willitscale.compute.layer import LayerSpec
from willitscale.compute.model import layer_spec, spec_for_model
from willitscale.memory.device import verdict_codes
from willitscale.memory.frameworks import convention_table, state_bytes_table
from willitscale.memory.stage import MemorySettings, StageMemory
from willitscale.memory.state import get_convention
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.scenario import Scenario
from willitscale.step.data import _layer_split
from willitscale.step.detail import StepDetail
from willitscale.step.network import AnalyticNetwork
from willitscale.workload.params import layer_fixed_params
from willitscale.workload.stages import ModelTerms, layer_kinds, model_terms

__all__ = ["Context", "BatchResult", "StepDetail", "make_context", "new_context", "memory_settings",
           "pick", "with_ddp"]



def pick(x, column):
    """``x[i, column[i]]`` for arrays of shape ``(plans, 3)``."""
    x, column = np.asarray(x), np.asarray(column)
    if x.ndim == 2 and x.shape[0] == column.shape[0]:
        return x[np.arange(column.shape[0]), column]
    return np.take_along_axis(x, column[:, None], axis=-1)[:, 0]


#: batches up to this many plans have their pure parts kept in :attr:`Context.memo`
MEMO_PLANS = 256
#: entries :attr:`Context.memo` holds before it starts afresh
MEMO_ENTRIES = 1024


def memo(ctx, key, make):
    """``make()``, kept in ``ctx.memo`` under ``key`` (a tuple naming every input of ``make``);
    ``key`` None: not kept (large batches)."""
    if key is None:
        return make()
    hit = ctx.memo.get(key)
    if hit is None:
        if len(ctx.memo) >= MEMO_ENTRIES:
            ctx.memo.clear()
        hit = ctx.memo[key] = make()
    return hit


#: every column of a :class:`~willitscale.scenario.batch.PlanBatch` (a :func:`batch_key` of
#: all of them keys a part that reads most of the plan)
ALL_COLUMNS = tuple(f.name for f in fields(PlanBatch))


def batch_key(batch, names) -> tuple | None:
    """The bytes of ``batch``'s columns ``names`` (a :func:`memo` key part); None for batches of
    more than :data:`MEMO_PLANS` plans."""
    if len(batch) > MEMO_PLANS:
        return None
    return tuple(np.ascontiguousarray(getattr(batch, n)).tobytes() for n in names)


@dataclass(frozen=True, slots=True, kw_only=True)
class Context:
    """What every plan of a scenario shares."""

    scenario: Scenario
    terms: ModelTerms
    links: ClusterLinks
    peak: float
    efficiency: Efficiency | None  #: a flat efficiency, or None (per-op model or measured step)
    grad_bytes: int
    convention: str  #: the --memory-convention given ("" = the frameworks' own bytes)
    memory: MemorySettings  #: what the memory model needs beyond the plan
    layer_fixed: float  #: norms + router parameters of one layer (not split by tp)
    expert_share: float  #: expert MLPs' share of a layer's split parameters
    spec: LayerSpec | None = None  #: when the per-op model times compute
    #: (dense-first layer, MoE layer) LayerSpecs of a MoE model whose first layers are dense, so
    #: that each stage's compute counts the layers it holds; None otherwise
    kind_specs: tuple[LayerSpec, LayerSpec] | None = None
    #: the :class:`~willitscale.step.network.Network` every group's lines come from (analytic,
    #: or the flow simulator with ``--network flow``); None: analytic
    network: object = None
    #: results of the engine's pure parts already computed for small batches on this context
    #: (per-op compute, group placements), by what they depend on (:func:`memo`); shared by the
    #: contexts :func:`dataclasses.replace` makes of it, so every key names its inputs
    memo: dict = field(default_factory=dict, repr=False, compare=False)


def make_context(scenario) -> Context:
    """What every plan of ``scenario`` shares. A scenario is immutable, so its context is made
    once and kept (the last :data:`KEPT_CONTEXTS` scenarios, by identity): the collective lines
    and the pure parts it keeps (:attr:`Context.memo`) then serve every later call on the same
    scenario (an estimate after a plan search, a what-if after an estimate)."""
    return _kept_context(_Same(scenario))


#: scenarios whose contexts :func:`make_context` keeps
KEPT_CONTEXTS = 32


class _Same:
    """A key that hashes and compares by the identity of what it holds (and keeps it alive)."""

    __slots__ = ("held",)

    def __init__(self, held) -> None:
        self.held = held

    def __hash__(self) -> int:
        return id(self.held)

    def __eq__(self, other) -> bool:
        return isinstance(other, _Same) and other.held is self.held


@lru_cache(maxsize=KEPT_CONTEXTS)
def _kept_context(key: _Same) -> Context:
    return new_context(key.held)


def new_context(scenario) -> Context:
    """A fresh :class:`Context` of ``scenario`` (:func:`make_context` keeps one per scenario)."""
    spec = per_op_spec(scenario)
    eff = (resolved_efficiency(scenario, per_op=spec is not None)
           if scenario.measured.step_time_one_gpu is None else None)
    fixed, share = 0.0, 0.0
    if scenario.model is not None:
        model = scenario.model
        fixed = float(layer_fixed_params(model))
        share = _layer_split(model, 1)[1]
    return Context(scenario=scenario, terms=model_terms(scenario), links=cluster_links(scenario),
                   peak=scenario.cluster.gpu.peak(scenario.dtype), efficiency=eff,
                   grad_bytes=scenario.ddp.grad_bytes,
                   convention=scenario.memory_convention, memory=memory_settings(scenario),
                   layer_fixed=fixed, expert_share=share,
                   spec=spec, kind_specs=_kind_specs(scenario, spec),
                   network=_network(scenario))


def with_ddp(ctx: Context, scenario) -> Context:
    """``ctx`` for ``scenario``, which differs from ``ctx.scenario`` at most in its DDP settings
    (``scenario.ddp``: the gradients' dtype, the buckets, overlap): only the fields made from
    them are made again (the gradient bytes and the memory model's settings); the links, the
    per-op compute, the network and what :attr:`Context.memo` keeps are shared (every memo key
    names the scenario or the gradient bytes where it reads them). Equals
    ``new_context(scenario)`` (tests/unit/test_estimate_fixes_passes.py)."""
    if replace(scenario, ddp=ctx.scenario.ddp) != ctx.scenario:
        raise ValueError("with_ddp: the scenarios differ beyond their DDP settings")
    return replace(ctx, scenario=scenario, grad_bytes=scenario.ddp.grad_bytes,
                   memory=memory_settings(scenario))


def _network(scenario):
    """The :class:`~willitscale.step.network.Network` of ``scenario``; the flow backend (and the
    simulator it imports) only with ``--network flow``."""
    if scenario.network is None:
        return AnalyticNetwork()
    from willitscale.step.flow_network import network_for

    return network_for(scenario)


def _kind_specs(scenario, spec):
    """The per-op specs of the two layer kinds of a dense-first MoE model (see Context)."""
    kinds = layer_kinds(scenario.model) if spec is not None and scenario.model is not None else None
    if kinds is None:
        return None
    return tuple(spec_for_model(spec, kind) for kind in kinds)


def per_op_spec(scenario):
    """The per-op model's :class:`~willitscale.compute.layer.LayerSpec`, or None when a flat
    efficiency times compute: one given (``--hfu``/``--mfu``), a measured single-GPU step, a
    calibration's measured flat efficiency without curves for this GPU, no model shape, or a
    GPU without compute curves."""
    if scenario.efficiency is not None or scenario.measured.step_time_one_gpu is not None:
        return None
    spec = layer_spec(scenario)
    cal = scenario.calibration
    if spec is not None and cal is not None and not spec.curves.measured:
        entry = cal.compute_for(scenario.dtype)
        flat = entry.efficiency if entry is not None else cal.compute_efficiency
        if flat is not None:
            return None
    return spec


def memory_settings(scenario) -> MemorySettings:
    """The memory model's inputs for ``scenario``: the frameworks' bytes per parameter (or the
    ``--memory-convention``'s), framework options and the CUDA context."""
    if scenario.memory_convention:
        c = get_convention(scenario.memory_convention)
        table = convention_table(c.weights, c.gradients, c.master, c.optimizer)
    else:
        table = state_bytes_table(scenario.dtype, scenario.ddp.grad_bytes)
    return MemorySettings(table=table, dtype=scenario.dtype, grad_bytes=scenario.ddp.grad_bytes,
                          gradient_as_bucket_view=scenario.ddp.gradient_as_bucket_view,
                          deepspeed=scenario.deepspeed,
                          foreach_adamw=scenario.optimizer == "adamw-foreach",
                          distribute_saved=scenario.distribute_saved_activations,
                          cuda_context=scenario.cuda_context)


@dataclass(frozen=True, slots=True, kw_only=True)
class BatchResult:
    """The estimate of every plan of a batch (arrays of shape ``(plans,)`` unless noted)."""

    step_time: np.ndarray
    data_loading: np.ndarray
    forward: np.ndarray  #: compute of the critical stage, all micro-batches
    backward: np.ndarray  #: incl. recomputation
    overlap_slowdown: np.ndarray
    exposed_comms: np.ndarray  #: every exposed communication (not the bubble)
    optimizer: np.ndarray
    bubble: np.ndarray
    compute: np.ndarray  #: forward + backward
    comms: np.ndarray  #: communication busy time of the critical stage's GPU per step
    model_flops: np.ndarray  #: per GPU per step (job total / GPUs)
    executed_flops: np.ndarray
    tokens_per_step: np.ndarray
    memory: StageMemory  #: arrays (plans, 3)
    memory_column: np.ndarray  #: the stage column with the most memory
    critical: np.ndarray  #: the stage column with the longest time per micro-batch
    counts: np.ndarray  #: stages per column (plans, 3)
    #: per GPU per step, causal attention counted for its unmasked half (causal-adjusted MFU)
    causal_model_flops: np.ndarray | None = None
    traffic: dict = field(default_factory=dict)  #: kind -> per-step dict of arrays
    detail: StepDetail | None = None  #: capacity, peak, ...; single-plan extras for reports

    def __repr__(self) -> str:
        step = np.asarray(self.step_time, dtype=float).reshape(-1)
        if step.size == 1:
            return f"BatchResult(1 plan: step {step[0]:.4g} s)"
        return (f"BatchResult({step.size} plans: step {np.nanmin(step):.4g} to "
                f"{np.nanmax(step):.4g} s)" if np.isfinite(step).any() else f"BatchResult({step.size} plans)")

    @property
    def memory_per_gpu(self) -> np.ndarray:
        return pick(self.memory.total, self.memory_column)

    @property
    def capacity(self) -> float:
        return self.detail.capacity

    @property
    def memory_limit(self) -> float:
        """Bytes a plan may fill: the scenario's ``memory_fraction`` x the GPU's memory."""
        return self.detail.memory_limit

    @property
    def allocated_per_gpu(self) -> np.ndarray:
        """PyTorch's peak (``max_memory_allocated``) on the fullest stage."""
        return pick(self.memory.allocated, self.memory_column)

    @property
    def verdict(self) -> np.ndarray:
        """Per plan: 0 fits, 1 tight, 2 does not fit (memory.device), the rule of estimate and
        plan."""
        return verdict_codes(self.allocated_per_gpu, self.memory.other, self.memory_limit,
                             self.memory.reserve)

    @property
    def fits(self) -> np.ndarray:
        """Per plan: fits or is tight (the GPU holds what it needs, margin or not)."""
        return self.verdict < 2

    @property
    def mfu(self) -> np.ndarray:
        return self.model_flops / (self.step_time * self.detail.peak)

    @property
    def mfu_causal(self) -> np.ndarray:
        """MFU with causal attention counted for its unmasked half (the FLOPs a causal kernel
        needs); :attr:`mfu` is PaLM's convention (attention counted in full)."""
        flops = self.model_flops if self.causal_model_flops is None else self.causal_model_flops
        return flops / (self.step_time * self.detail.peak)

    @property
    def hfu(self) -> np.ndarray:
        return self.executed_flops / (self.step_time * self.detail.peak)

    @property
    def tflops_per_gpu(self) -> np.ndarray:
        return self.model_flops / self.step_time / 1e12

    @property
    def hardware_tflops_per_gpu(self) -> np.ndarray:
        return self.executed_flops / self.step_time / 1e12
