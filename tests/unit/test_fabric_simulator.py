"""The event-driven simulator: hand-timed cases, phase reuse = full simulation, invariants."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from willitscale.fabric import Phase, Stream, Traffic, simulate, simulate_collective
from willitscale.fabric.traffic import collective_traffic
from willitscale.topology import (
    FabricLinks,
    Router,
    nvswitch_node,
    parse_routing,
    rail_optimized,
)

LINKS = FabricLinks(nic_bandwidth=50e9, nic_latency=2e-6, nvlink_bandwidth=450e9, nvlink_latency=1e-6,
                    switch_latency=0.5e-6)


def _one(src, dst, size, **kw):
    return Stream(name=kw.pop("name", "s"), phases=(Phase(src=src, dst=dst, size=size, **kw),))


def test_one_flow_over_nvlink():
    # 4.5 GB at 450 GB/s = 10 ms, plus 1 us NVLink latency
    t = nvswitch_node(gpus_per_node=2, links=LINKS)
    r = simulate(t, Traffic([_one([0], [1], 4.5e9)]))
    assert r.completion_time == pytest.approx(10e-3 + 1e-6, rel=1e-12)


def test_two_flows_share_then_one_takes_all():
    # Three 1-GPU servers on one leaf; GPUs 1 and 2 both send to GPU 0, sharing its 50 GB/s
    # leaf->GPU link. Sizes 1 GB and 3 GB: both at 25 GB/s until the 1 GB one ends at 40 ms, then
    # the other has 2 GB left at 50 GB/s: 40 ms more -> 80 ms (= 4 GB / 50 GB/s), plus 2 us.
    t = rail_optimized(nodes=3, gpus_per_node=1, links=LINKS)
    r = simulate(t, Traffic([_one([1, 2], [0, 0], [1e9, 3e9])]))
    assert r.completion_time == pytest.approx(80e-3 + 2e-6, rel=1e-12)
    assert r.solves == 2


def test_ring_all_reduce_on_one_leaf_matches_alpha_beta():
    # 4 servers x 1 GPU on one leaf: ring all_reduce of S over n = 4: 2(n-1) = 6 steps of S/n at
    # 50 GB/s, each paying the 2 us NIC latency: 6 * (0.25 GB / 50 GB/s + 2 us) = 30.012 ms
    t = rail_optimized(nodes=4, gpus_per_node=1, links=LINKS)
    rep = simulate_collective(t, "all_reduce", 1e9)
    assert rep.completion_time == pytest.approx(6 * (0.25e9 / 50e9 + 2e-6), rel=1e-12)
    # busbw = 2(n-1)/n * S / t
    assert rep.busbw == pytest.approx(1.5 * 1e9 / rep.completion_time)


@pytest.mark.parametrize("routing", ["ecmp", "spray", "adaptive", "rail"])
def test_phase_reuse_is_exact(routing):
    t = rail_optimized(nodes=6, gpus_per_node=4, oversubscription=3, links=LINKS)
    tr = collective_traffic(t, "all_reduce", 3e8, placement="flat")
    a = simulate(t, tr, parse_routing(routing, seed=3), reuse_phases=True)
    b = simulate(t, tr, parse_routing(routing, seed=3), reuse_phases=False)
    assert a.steps_reused > 0 and b.steps_reused == 0
    assert a.completion_time == pytest.approx(b.completion_time, rel=1e-9)
    assert np.allclose(a.link_bytes, b.link_bytes, rtol=1e-9, atol=1.0)
    assert np.array_equal(a.link_peak_flows, b.link_peak_flows)


def test_concurrent_streams_on_disjoint_links_run_as_if_alone():
    t = rail_optimized(nodes=4, gpus_per_node=2, links=LINKS)
    a, b = _one([0], [1], 1e9, name="a"), _one([2], [3], 2e9, name="b")  # two different servers
    r = simulate(t, Traffic([a, b]))
    assert r.stream_times["a"] == pytest.approx(1e9 / 450e9 + 1e-6)
    assert r.stream_times["b"] == pytest.approx(2e9 / 450e9 + 1e-6)


def test_stream_start_offset_and_repeat():
    t = nvswitch_node(gpus_per_node=2, links=LINKS)
    s = Stream(name="s", phases=(Phase(src=[0], dst=[1], size=4.5e8, repeat=3),), start=1e-3)
    # 1 ms late, then 3 x (1 ms + 1 us)
    assert simulate(t, Traffic([s])).completion_time == pytest.approx(1e-3 + 3 * (1e-3 + 1e-6))


def test_zero_size_phase_costs_only_latency():
    t = nvswitch_node(gpus_per_node=2, links=LINKS)
    assert simulate(t, Traffic([_one([0], [1], 0.0)])).completion_time == pytest.approx(1e-6)


def test_same_seed_same_result_and_seeds_matter():
    t = rail_optimized(nodes=16, gpus_per_node=8, oversubscription=4, links=LINKS)
    tr = collective_traffic(t, "all_reduce", 1e9, placement="flat")
    times = [simulate(t, tr, parse_routing("ecmp", seed=s)).completion_time for s in (1, 1, 2, 3, 4)]
    assert times[0] == times[1]
    assert len(set(times)) > 1


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10**6), nodes=st.integers(2, 5), gpn=st.sampled_from([1, 2, 4]),
       over=st.sampled_from([1.0, 2.0, 4.0]), routing=st.sampled_from(["ecmp", "spray", "adaptive", "rail"]),
       size=st.floats(1e3, 1e9))
def test_never_faster_than_the_bottleneck_bound(seed, nodes, gpn, over, routing, size):
    """A ring all_reduce never beats, step by step, its slowest flow running alone, and no link
    ever carries more than its capacity over the run."""
    t = rail_optimized(nodes=nodes, gpus_per_node=gpn, radix=8, oversubscription=over, links=LINKS)
    perm = np.random.default_rng(seed).permutation(t.gpus)
    rt = parse_routing(routing, seed=seed)
    r = simulate(t, collective_traffic(t, "all_reduce", size, gpus=perm, channels=1), rt)
    # bound: each of the 2(n-1) steps lasts at least max over flows of chunk / (fastest that
    # flow could go alone = min over its links of capacity / fraction) + its latency (for a
    # ring: the mean hop latency, see Phase.latency_mode)
    phase = r.traffic.streams[0].phases[0]
    routes = Router(t).route(phase.src, phase.dst, phase.key, rt)
    alone = np.full(phase.flows, np.inf)
    np.minimum.at(alone, routes.flow, t.link_capacity[routes.link] / routes.frac)
    lat = routes.latency.mean() if phase.latency_mode == "mean" else routes.latency
    step = np.max(phase.size / alone + lat)
    assert r.completion_time >= phase.repeat * step * (1 - 1e-9)
    assert np.all(r.link_bytes <= t.link_capacity * r.completion_time * (1 + 1e-9))


def test_adaptive_can_lose_to_ecmp_as_documented():
    # review-2 FB1, docs/fabric.md "adaptive": per-hop greedy choices that count flows can do
    # worse than hashing. Dragonfly of 4 groups x 4 routers x 2 global links, 2 one-GPU servers per
    # router (8 GPUs per group); 8 global ports per group over 3 peer groups, so group 3 has only
    # 2 cables to each other group. all_to_all of 100 MB over 32 GPUs: group 3 sends
    # 8 x 8 x 100 MB / 32 = 200 MB to group 0 over 2 x 50 GB/s -> no routing beats 2 ms.
    from willitscale.topology import dragonfly

    t = dragonfly(groups=4, routers_per_group=4, global_links=2, nodes_per_router=2, gpus_per_node=1)
    tr = collective_traffic(t, "all_to_all", 100e6)
    times = {r: simulate(t, tr, parse_routing(r)).completion_time for r in ("ecmp", "adaptive", "spray")}
    assert min(times.values()) >= 2e-3
    assert times["adaptive"] > 1.1 * times["ecmp"]  # 2.69 ms vs 2.32 ms (seed 0); spray 2.05 ms


def _same_run(a, b):
    assert a.completion_time == pytest.approx(b.completion_time, rel=1e-9)
    for name, t in a.stream_times.items():
        assert t == pytest.approx(b.stream_times[name], rel=1e-9)
    assert np.allclose(a.link_bytes, b.link_bytes, rtol=1e-9, atol=1.0)
    assert np.array_equal(a.link_peak_flows, b.link_peak_flows)
    assert a.solves == b.solves and a.steps_simulated == b.steps_simulated


def _traffics():
    from willitscale.fabric.step import ParallelLayout, StepComm, step_traffic
    from willitscale.fabric.traffic import incast_traffic, jobs_traffic
    from willitscale.topology import fat_tree

    ro = rail_optimized(nodes=8, gpus_per_node=4, radix=8, oversubscription=2, links=LINKS)
    ft = fat_tree(k=8, nodes=8, gpus_per_node=4, oversubscription=2, links=LINKS)
    yield "ring, flat placement", ro, collective_traffic(ro, "all_reduce", 3e8, placement="flat")
    yield "two interleaved jobs", ro, jobs_traffic(ro, 2, "all_reduce", 2e8, layout="interleaved")
    yield "all_to_all", ro, collective_traffic(ro, "all_to_all", 1e8)
    yield "incast", ro, incast_traffic([4 * n for n in range(1, 8)], 0, 1e8)
    comm = StepComm(tp_bytes=5e7, tp_count=2, pp_bytes=5e7, pp_count=2, dp_bytes=4e8)
    yield "training step", ft, step_traffic(ft, ParallelLayout(tp=4, pp=2, dp=4), comm)


@pytest.mark.parametrize("routing", ["ecmp", "spray", "adaptive", "rail"])
@pytest.mark.parametrize("case", list(range(5)))
def test_incremental_solver_simulates_what_the_full_re_solve_does(case, routing):
    # issue 15: the simulator re-solves only what an event touches; the old way (every flow in
    # flight re-solved at every event, by the reference solver) must give the same run
    _, topo, traffic = list(_traffics())[case]
    if routing == "rail" and topo.kind == "fat-tree":
        pytest.skip("rail routing is for rail fabrics")
    rt = parse_routing(routing, seed=7)
    for reuse in (True, False):
        new = simulate(topo, traffic, rt, reuse_phases=reuse)
        old = simulate(topo, traffic, rt, reuse_phases=reuse, solver="reference")
        _same_run(new, old)
        assert new.flows_resolved <= old.flows_resolved


def test_unknown_solver_is_a_config_error():
    from willitscale.errors import ConfigError

    t = nvswitch_node(gpus_per_node=2, links=LINKS)
    with pytest.raises(ConfigError, match="solver"):
        simulate(t, Traffic([_one([0], [1], 1e9)]), solver="fast")


@pytest.mark.parametrize("routing", ["ecmp", "spray", "adaptive"])
def test_shared_routes_give_the_same_results_and_route_each_phase_once(routing, monkeypatch):
    """``routes=PhaseRoutes(topo)`` across the streams together and each alone (what ``fabric
    simulate --step`` does): every result equal to separate simulations'; under ECMP and spray
    each phase routed once, under adaptive every step routed again (its routes depend on the load)."""
    from willitscale.errors import ConfigError
    from willitscale.fabric.simulator import PhaseRoutes

    topo = rail_optimized(nodes=4, gpus_per_node=4, links=LINKS, oversubscription=2.0)
    tr = Traffic([*collective_traffic(topo, "all_reduce", 1e8).streams,
                  _one([0, 5], [9, 14], 3e8, name="p2p", repeat=3)])
    r = parse_routing(routing, seed=2)
    apart = [simulate(topo, tr, r)] + [simulate(topo, Traffic([s]), r) for s in tr.streams]
    calls = []
    real = Router.route
    monkeypatch.setattr(Router, "route", lambda self, *a, **k: calls.append(1) or real(self, *a, **k))
    routes = PhaseRoutes(topo)
    shared = [simulate(topo, tr, r, routes=routes)] + [simulate(topo, Traffic([s]), r, routes=routes)
                                                       for s in tr.streams]
    for a, b in zip(apart, shared):
        assert a.completion_time == b.completion_time
        assert np.array_equal(a.link_bytes, b.link_bytes)
        assert dict(a.stream_times) == dict(b.stream_times)
    phases = sum(len(s.phases) for s in tr.streams)
    steps = sum(b.steps_simulated for b in shared)
    assert len(calls) == (steps if routing == "adaptive" else phases)
    with pytest.raises(ConfigError, match="routes"):  # another topology (an equal one: not the same object)
        simulate(rail_optimized(nodes=4, gpus_per_node=4, links=LINKS, oversubscription=2.0), tr, r, routes=routes)
