"""Scaling sweeps: the same job on 1..N nodes, with speedup and scaling efficiency.

Each node count is its own scenario built from the same settings, so the batch knob given
decides the kind of scaling: ``--micro-batch`` keeps the work per GPU (weak scaling: the global
batch grows with the GPUs), ``--global-batch`` keeps the global batch (strong scaling: each GPU
gets less). Throughput is tokens per second of the whole job, so::

    speedup    = throughput(N) / throughput(N0)
    efficiency = speedup / (gpus(N) / gpus(N0))

with ``N0`` the first node count of the sweep. The row's ``bottleneck`` is the estimate's verdict
(:mod:`willitscale.estimation.verdict.bottleneck`): a network when exposed communication exceeds 5% of the step, ``out of
memory`` when the plan does not fit (the numbers are still computed, so the sweep shows where it
starts to fit); ``comms_is_bottleneck`` says whether that verdict is a network, the handbook's
column "comms is a bottleneck" by our criterion. ``fits`` is the memory verdict (None when
activations are unknown and the state alone fits).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from willitscale.errors import ConfigError
from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario

__all__ = ["ScalingRow", "parse_nodes", "scaling_rows"]

MAX_SWEEP_POINTS = 4096


@dataclass(frozen=True, slots=True, kw_only=True)
class ScalingRow:
    """One node count of a sweep."""

    nodes: int
    gpus: int
    global_batch: int
    step_time: float
    compute: float
    comms: float
    exposed_comms: float
    comms_is_bottleneck: bool
    bottleneck: str
    tokens_per_s: float
    mfu: float
    speedup: float
    efficiency: float
    fits: bool | None = True
    memory_per_gpu: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"nodes": self.nodes, "gpus": self.gpus, "global_batch": self.global_batch,
                "step_time_s": self.step_time, "compute_s": self.compute, "comms_s": self.comms,
                "exposed_comms_s": self.exposed_comms,
                "comms_is_bottleneck": self.comms_is_bottleneck, "bottleneck": self.bottleneck,
                "tokens_per_s": self.tokens_per_s, "mfu": self.mfu, "speedup": self.speedup,
                "scaling_efficiency": self.efficiency, "fits": self.fits,
                "memory_per_gpu_bytes": self.memory_per_gpu}


def _powers_of_two(lo: int, hi: int) -> list[int]:
    out, n = [], 1
    while n <= hi:
        if n >= lo:
            out.append(n)
        n *= 2
    if not out or out[0] != lo:
        out.insert(0, lo)
    if out[-1] != hi:
        out.append(hi)
    return out


def parse_nodes(text: str | int | Sequence[int]) -> list[int]:
    """Node counts from ``"1,2,4,8"``, a range ``"1-8"`` / ``"1..64"`` (powers of two between,
    ends included) or a mix ``"1..8,12"``; sorted, duplicates removed."""
    if isinstance(text, int):
        text = str(text)
    if not isinstance(text, str):
        values = [int(v) for v in text]
    else:
        values = []
        parts = [p.strip() for p in text.split(",")]
        if not all(parts):
            raise ConfigError("--nodes", text, "node counts such as 1,2,4,8 or a range 1..64 "
                              "(no empty entries)")
        for part in parts:
            m = re.fullmatch(r"(\d+)\s*(?:-|\.\.)\s*(\d+)", part)
            if m:
                lo, hi = int(m[1]), int(m[2])
                if lo < 1 or hi < lo:
                    raise ConfigError("--nodes", part, "a range lo-hi or lo..hi with 1 <= lo <= hi")
                values += _powers_of_two(lo, hi)
            elif part.isdigit():
                values.append(int(part))
            else:
                raise ConfigError("--nodes", text, "node counts such as 1,2,4,8 or a range 1..64")
    values = sorted(set(values))
    if not values or values[0] < 1:
        raise ConfigError("--nodes", text, "node counts >= 1")
    if len(values) > MAX_SWEEP_POINTS:
        raise ConfigError("--nodes", text, f"at most {MAX_SWEEP_POINTS} node counts")
    return values


def scaling_rows(settings: Mapping[str, Any], nodes: Sequence[int]) -> list[ScalingRow]:
    """Estimate ``settings`` at each node count; speedup and efficiency against the first."""

    rows: list[ScalingRow] = []
    base = None
    # every node count checked before the first estimate: an out-of-range count fails at once
    scenarios = [build_scenario({**settings, "nodes": n}) for n in nodes]
    for n, scenario in zip(nodes, scenarios):
        est = estimate(scenario, allow_oom=True)
        if base is None:
            base = est
        speedup = est.tokens_per_s / base.tokens_per_s
        rows.append(ScalingRow(
            nodes=n, gpus=est.gpus, global_batch=est.global_batch, step_time=est.step_time,
            compute=est.compute, comms=est.comms, exposed_comms=est.exposed_comms,
            comms_is_bottleneck=est.scaling_verdict, bottleneck=est.bottleneck.resource,
            tokens_per_s=est.tokens_per_s, mfu=est.mfu, speedup=speedup,
            efficiency=speedup / (est.gpus / base.gpus), fits=est.memory.fits,
            memory_per_gpu=est.memory.total))
    return rows
