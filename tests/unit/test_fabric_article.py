"""The article's fabric findings (002, "GPU fabrics for GenAI workloads"), with our numbers."""

import numpy as np
import pytest

from willitscale.fabric import (
    ParallelLayout,
    Phase,
    StepComm,
    Stream,
    Traffic,
    simulate,
    step_traffic,
)
from willitscale.topology import FabricLinks, Router, parse_routing, rail_optimized

LINKS = FabricLinks(nic_bandwidth=50e9, nic_latency=2e-6, nvlink_bandwidth=450e9, nvlink_latency=1e-6,
                    switch_latency=0.5e-6)


def test_ecmp_leaves_spine_capacity_idle_where_spraying_fills_it():
    # "The link utilization could go below 50% ... with ECMP"; "Packet spraying could improve the
    # parallel link utilization to >90%". Two leaves of 8 one-GPU servers, 8 spines (radix 16,
    # non-blocking); 8 long flows of 1 GB from leaf 0 to leaf 1. Spraying: every flow gets 1/8 of
    # every spine path -> 20 ms. ECMP: a flow keeps one spine; the busiest uplink with m flows
    # sets the time, m x 20 ms, and the 8 uplinks are used 8 / (8 m) = 1/m of that time.
    t = rail_optimized(nodes=16, gpus_per_node=1, radix=16, links=LINKS)
    flows = Traffic([Stream(name="x", phases=(Phase(src=np.arange(8), dst=np.arange(8, 16), size=1e9),))])
    up = np.flatnonzero(np.asarray(t.tiers)[t.link_tier] == "leaf->spine")
    spray = simulate(t, flows, parse_routing("spray"))
    assert spray.completion_time == pytest.approx(0.02 + 3e-6)
    assert spray.link_utilization[up[:8]].mean() > 0.99
    util = []
    for seed in range(1, 21):
        rt = parse_routing("ecmp", seed=seed)
        r = simulate(t, flows, rt)
        routes = Router(t).route(np.arange(8), np.arange(8, 16), np.zeros(8), rt)
        m = np.bincount(routes.link[np.isin(routes.link, up)]).max()
        assert r.completion_time == pytest.approx(m * 0.02 + 3e-6)
        util.append(r.link_bytes[up].sum() / (8 * 50e9 * r.completion_time))
    # balls into bins: the busiest of 8 uplinks gets 2-3 of 8 flows -> ~40% average use
    assert np.mean(util) < 0.6


def test_7_to_1_spine_slows_dp_not_tp_or_pp_kept_in_a_rail():
    # 28 servers x 8 GPUs, two leaves per rail of 14 servers each. Radix 16 at 7:1 gives each leaf
    # 2 uplinks; radix 28 at 1:1 gives 14. Layout TP 8 (a server) x PP 14 (the 14 servers of one
    # leaf group) x DP 2 (across the two groups): only DP crosses the spine.
    layout = ParallelLayout(tp=8, pp=14, dp=2, order=("tp", "cp", "ep", "pp", "dp"))
    comm = StepComm(tp_bytes=1e8, tp_count=2, pp_bytes=1e8, pp_count=2, dp_bytes=1e9)
    times = {}
    for over, radix in ((7, 16), (1, 28)):
        t = rail_optimized(nodes=28, gpus_per_node=8, radix=radix, oversubscription=over, links=LINKS)
        tr = step_traffic(t, layout, comm)
        times[over] = {s.name: simulate(t, Traffic([s]), parse_routing("spray")).completion_time
                       for s in tr.streams}
    assert times[7]["tp"] == times[1]["tp"] and times[7]["pp"] == times[1]["pp"]
    # DP: a ring of 2 over the spine = 2 steps of 0.5 GB. Each leaf sends 14 DP flows up:
    # 1:1 -> each at its 50 GB/s NIC; 7:1 -> 2 x 50 GB/s / 14 = 7.14 GB/s. Path latency 3 us.
    assert times[1]["dp"] == pytest.approx(2 * (0.5e9 / 50e9 + 3e-6))
    assert times[7]["dp"] == pytest.approx(2 * (0.5e9 / (100e9 / 14) + 3e-6))
    assert times[7]["dp"] / times[1]["dp"] == pytest.approx(7, rel=1e-3)
