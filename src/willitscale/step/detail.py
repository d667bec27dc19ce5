"""The typed parts of the engine's answer beyond its per-plan arrays.

:class:`StepDetail` replaces the ``detail`` dict a :class:`~willitscale.step.engine.BatchResult`
carried: what every run fills (the GPU's capacity and peak, the memory limit, the pipeline
time, micro-batches, data loading) and, for a single-plan report (``run(..., detail=True)``),
the parts the estimate dresses: group placements, compute per micro-batch, model-parallel
traffic, the gradient tail, stage shapes and parameters. :class:`ComputeTimes` and
:class:`GradientTail` are the engine's intermediate results those reports read.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from willitscale.step.traffic import Traffic
from willitscale.topology.placement import GroupPlacement

__all__ = ["StepDetail", "ComputeTimes", "GradientTail"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ComputeTimes:
    """Compute seconds per micro-batch: ``forward``/``backward`` (incl. recomputation) per stage
    column ``(plans, 3)``; per layer ``(plans,)``: the weight-gradient GEMMs tensor-parallel
    backward all-reduces hide behind and the attention core's forward (ring attention's cover);
    ``kinds``: the per-op model's split by op kind (detail runs only); ``ops``: its op times."""

    forward: np.ndarray
    backward: np.ndarray
    wgrad_qkv: np.ndarray
    wgrad_fc1: np.ndarray
    wgrad_head: np.ndarray
    attention: np.ndarray
    kinds: dict[str, dict[str, np.ndarray]] = field(default_factory=dict)
    ops: tuple = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class GradientTail:
    """What runs after each stage's last backward (:func:`willitscale.step.tail.gradient_tail`):
    arrays ``(plans, 3)`` per stage column or ``(plans,)`` per plan."""

    total: np.ndarray  #: gradient buckets' busy seconds per column
    exposed: np.ndarray  #: of which after the last backward
    hidden: np.ndarray  #: of which under a backward
    slowdown: np.ndarray  #: the last backward's stretch by its overlap
    extra: np.ndarray  #: ZeRO-2's per-micro-batch reduce-scatters not hidden (plans,)
    tail: np.ndarray  #: the step's tail after the drain's slack (plans,)
    tail_col: np.ndarray  #: the column that ends the step (plans,)
    emb_ar: np.ndarray  #: the tied-embedding all-reduce (plans,)
    ag_total: np.ndarray  #: ZeRO-1/2's weight all-gather (plans,)
    ag_exposed: np.ndarray  #: of which not hidden by the next forward (plans,)
    #: column -> (bucket bytes, ready times, durations, calls, stretch) of plan 0 (detail runs)
    schedule: dict = field(default_factory=dict)
    #: column -> the experts' (time, exposed) shares of plan 0's buckets (detail runs)
    experts: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True, kw_only=True)
class StepDetail:
    """The engine's answer beyond the per-plan arrays. The first group is filled on every run
    (memory-only runs fill only ``capacity``, ``peak`` and ``memory_limit``); the second on
    single-plan detail runs (None otherwise)."""

    capacity: float  #: bytes of the GPU's memory
    peak: float  #: FLOP/s of the GPU at the scenario's dtype
    memory_limit: float  #: bytes a plan may fill: memory_fraction x capacity
    pipeline: np.ndarray | None = None  #: seconds of the pipeline part of the step (plans,)
    micro_batches: np.ndarray | None = None  #: gradient accumulation steps (plans,)
    load: np.ndarray | None = None  #: seconds reading the step's samples (plans,)
    places: dict[str, GroupPlacement] | None = None  #: kind -> where its groups sit
    comp: ComputeTimes | None = None
    traffic: dict[str, Traffic] | None = None  #: model-parallel kind -> per micro-batch
    tail: GradientTail | None = None
    stage_counts: np.ndarray | None = None  #: stages per column (plans, 3)
    layers: np.ndarray | None = None  #: layers per stage per column (plans, 3)
    #: parameters one GPU holds per column: (dense, expert) (plans, 3), one layer's (plans, 1)
    params: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    #: part (forward, backward, recompute) -> op kind -> seconds per step (plans,)
    compute_kinds: dict[str, dict[str, np.ndarray]] | None = None
    #: the network backend's per-group answer (filled by the Network protocol's work, issue 14)
    network: object = None
