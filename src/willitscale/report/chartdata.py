"""What the figures draw, as plain arrays, from the model's results (pure: no matplotlib).

The plot functions of :mod:`willitscale.report.plots` take plain data (sequences of numbers and
labels) so that any producer can feed them: the estimate, a scaling sweep, a planner's list,
benchmark rows, a fabric simulation. This module turns the estimate's objects into that data,
and computes the few derived series a figure marks (the crossover, the ideal line).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from willitscale.errors import ConfigError

__all__ = ["BREAKDOWN_PARTS", "breakdown_parts", "compute_time", "crossover", "ideal_throughput",
           "efficiency", "memory_parts", "pair_matrix", "LIMIT_SHORT"]

#: the bottleneck verdicts as the scaling tables' "limit" column shows them
LIMIT_SHORT = {"compute": "compute", "inter-node network": "inter", "intra-node network": "intra",
               "storage": "storage", "out of memory": "OOM"}


def compute_time(est) -> float:
    """Seconds of compute per step as every report compares it: forward + backward (incl.
    recomputation), the bottleneck's busy ``compute``; the overlap slowdown and the optimizer
    are not in it. The verdict, the comms-vs-compute chart and ``scale`` use this one number."""
    busy = dict(getattr(est.bottleneck, "busy", ()))
    return float(busy.get("compute", est.compute))

#: the breakdown's fields in drawing order (bottom to top), as style meanings
BREAKDOWN_PARTS = (("data_loading", "data"), ("forward", "forward"), ("backward", "backward"),
                   ("overlap_slowdown", "overlap_slowdown"), ("bubble", "bubble"),
                   ("exposed_comms", "exposed_comms"), ("optimizer", "optimizer"))


def breakdown_parts(breakdowns: Sequence) -> dict[str, list[float]]:
    """``{meaning: [seconds per breakdown]}`` for the parts that are non-zero somewhere.

    ``breakdowns`` are :class:`~willitscale.estimation.result.Breakdown` objects (or anything with the
    same attributes); the parts of each add up to its step time.
    """
    out: dict[str, list[float]] = {}
    for field, meaning in BREAKDOWN_PARTS:
        values = [float(getattr(b, field, 0.0) or 0.0) for b in breakdowns]
        if any(v > 0 for v in values):
            out[meaning] = values
    return out


def crossover(x: Sequence[float], below: Sequence[float], above: Sequence[float]) -> float | None:
    """The first ``x`` where ``above`` overtakes ``below``, interpolated linearly in ``log2 x``.

    ``None`` when ``above <= below`` everywhere or already ``above > below`` at the first point
    (no crossing inside the range). With ``d = above - below`` going from ``d0 <= 0`` at ``x0``
    to ``d1 > 0`` at ``x1``, the crossing is at ``log2 x = log2 x0 + (log2 x1 - log2 x0) x
    d0 / (d0 - d1)``.
    """
    if not (len(x) == len(below) == len(above)):
        raise ConfigError("crossover: x, below and above must have the same length")
    d = [a - b for a, b in zip(above, below)]
    if not d or d[0] > 0:
        return None
    for i in range(1, len(d)):
        if d[i] > 0:
            lo, hi = math.log2(x[i - 1]), math.log2(x[i])
            t = d[i - 1] / (d[i - 1] - d[i])
            return 2.0 ** (lo + (hi - lo) * t)
    return None


def ideal_throughput(gpus: Sequence[float], throughput: Sequence[float]) -> list[float]:
    """Linear scaling from the first point: ``throughput[0] x gpus / gpus[0]``."""
    return [throughput[0] * g / gpus[0] for g in gpus]


def efficiency(gpus: Sequence[float], throughput: Sequence[float]) -> list[float]:
    """Scaling efficiency against the first point: ``(T / T0) / (G / G0)``."""
    return [t / i for t, i in zip(throughput, ideal_throughput(gpus, throughput))]


def memory_parts(memories: Sequence) -> dict[str, list[float | None]]:
    """``{meaning: [bytes per memory breakdown]}`` (activations ``None`` when unknown) that add
    up to :attr:`MemoryBreakdown.total`: the training state, the activations, then each other
    part when any breakdown has some: buffers (DDP/DeepSpeed buckets, gathered FSDP/ZeRO-3
    layers, pipeline receive buffers), workspace (cuBLAS, autocast's weight copies), the
    optimizer step's temporaries beyond the forward/backward peak (the allocated peak is the
    state plus the larger of the two, docs/memory.md), the CUDA context and NCCL's buffers."""
    out = {
        "weights": [m.weights for m in memories],
        "gradients": [m.gradients for m in memories],
        "master_weights": [float(getattr(m, "master", 0.0) or 0.0) for m in memories],
        "optimizer_states": [m.optimizer for m in memories],
        "activations": [m.activations for m in memories],
    }
    if not any(out["master_weights"]):
        del out["master_weights"]
    during = [(m.activations or 0.0) + float(getattr(m, "buffers", 0.0) or 0.0)
              + float(getattr(m, "workspace", 0.0) or 0.0) for m in memories]
    others = {
        "buffers": [float(getattr(m, "buffers", 0.0) or 0.0) for m in memories],
        "workspace": [float(getattr(m, "workspace", 0.0) or 0.0) for m in memories],
        "step_temporaries": [max(0.0, float(getattr(m, "step", 0.0) or 0.0) - d)
                             for m, d in zip(memories, during)],
        "cuda_context": [float(getattr(m, "context", 0.0) or 0.0) for m in memories],
        "nccl": [float(getattr(m, "nccl", 0.0) or 0.0) for m in memories],
    }
    out.update({k: v for k, v in others.items() if any(v)})
    return out


def pair_matrix(pair_ids, pair_bytes, gpus: int, *, group: int = 1):
    """Dense ``(gpus/group) x (gpus/group)`` bytes matrix from ``(src * gpus + dst, bytes)`` pairs
    (what :meth:`willitscale.collectives.phases.Traffic.pair_bytes` returns); ``group`` > 1 sums
    blocks of ``group`` GPUs (a node) so a large cluster still fits one picture."""
    import numpy as np

    ids = np.asarray(pair_ids, dtype=np.int64)
    vol = np.asarray(pair_bytes, dtype=float)
    n = -(-gpus // group)
    src, dst = (ids // gpus) // group, (ids % gpus) // group
    out = np.zeros((n, n))
    np.add.at(out, (src, dst), vol)
    return out
