"""The flow-level fabric simulator: traffic as phases of flows, max-min fair sharing, reports.

>>> from willitscale.topology import build_topology, parse_routing
>>> from willitscale.fabric import simulate_collective
>>> topo = build_topology("rail-optimized", nodes=4, gpus_per_node=8)
>>> rep = simulate_collective(topo, "all_reduce", 1e9, routing=parse_routing("spray"))
>>> round(rep.busbw / 1e9)  # 8 rings, one per NIC rail, each limited by a 50 GB/s NIC
390
"""

from willitscale.fabric.collective import (
    CollectiveReport,
    SeedSweep,
    calls_time,
    collective_time,
    simulate_collective,
    sweep_seeds,
)
from willitscale.fabric.flows import Phase, Stream, Traffic
from willitscale.fabric.maxmin import max_min_fair
from willitscale.fabric.report import LinkReport, TrafficMatrix, link_report, traffic_matrix
from willitscale.fabric.simulator import SimulationResult, simulate
from willitscale.fabric.step import ParallelLayout, StepComm, step_traffic
from willitscale.fabric.traffic import (
    CollectiveCall,
    calls_traffic,
    collective_call,
    collective_traffic,
    incast_traffic,
    jobs_traffic,
    ring_order,
)

__all__ = [
    "Phase", "Stream", "Traffic", "max_min_fair", "simulate", "SimulationResult",
    "LinkReport", "link_report", "TrafficMatrix", "traffic_matrix",
    "CollectiveCall", "collective_call", "collective_traffic", "calls_traffic", "incast_traffic",
    "jobs_traffic", "ring_order", "ParallelLayout", "StepComm", "step_traffic",
    "CollectiveReport", "simulate_collective", "SeedSweep", "sweep_seeds", "calls_time", "collective_time",
]
