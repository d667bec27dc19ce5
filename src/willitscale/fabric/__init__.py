"""The flow-level fabric simulator: traffic as phases of flows, max-min fair sharing, reports.

>>> from willitscale.topology import build_topology, parse_routing
>>> from willitscale.fabric import simulate_collective
>>> topo = build_topology("rail-optimized", nodes=4, gpus_per_node=8)
>>> rep = simulate_collective(topo, "all_reduce", 1e9, routing=parse_routing("spray"))
>>> round(rep.busbw / 1e9)  # 8 rings, one per NIC rail, each limited by a 50 GB/s NIC
390
"""

from __future__ import annotations

import importlib
from typing import Any

# public name -> module under willitscale.fabric (loaded lazily); the flow data types live in
# willitscale.collectives.phases (the collectives' flows are built from them) and are re-exported
_EXPORTS = {
    **dict.fromkeys(["Phase", "Stream", "Traffic"], "willitscale.collectives.phases"),
    "max_min_fair": "maxmin",
    **dict.fromkeys(["simulate", "SimulationResult"], "simulator"),
    **dict.fromkeys(["LinkReport", "link_report", "TrafficMatrix", "traffic_matrix"], "report"),
    **dict.fromkeys(["CollectiveCall", "collective_call", "collective_traffic", "calls_traffic",
                     "incast_traffic", "jobs_traffic", "ring_order"], "traffic"),
    **dict.fromkeys(["ParallelLayout", "StepComm", "step_traffic"], "step"),
    **dict.fromkeys(["CollectiveReport", "simulate_collective", "SeedSweep", "sweep_seeds", "calls_time",
                     "collective_time", "FlowCollectiveModel", "flow_collective_model"], "collective"),
    "cluster_topology": "cluster",
    "FlowNetwork": "backend",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'willitscale.fabric' has no attribute {name!r}")
    path = module if module.startswith("willitscale.") else f"willitscale.fabric.{module}"
    value = getattr(importlib.import_module(path), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
