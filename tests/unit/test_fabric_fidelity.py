"""The simulator's two fidelities (``exact``, ``coarse``) and the ``auto`` choice between them.

``coarse`` re-solves the max-min rates only when flows start; a finishing flow's bandwidth stays
unused until then (module docstring of :mod:`willitscale.fabric.simulator`).

**Where coarse is exact** (proved here, tested below). One stream whose every step is flows of
equal size ``S`` started together, each step charged one latency after its last byte (e.g. its
flows' mean path latency):

1. Let ``L1`` be the lowest max-min rate at the step's start: the level at which progressive
   filling fills its first link ``e1``, every flow on ``e1`` frozen at ``L1``, so
   ``cap(e1) = sum_i w_i L1`` over its flows (``w_i``: the flow's fraction on ``e1``).
2. Removing flows never lowers the lowest rate: at any level below ``L1`` every link's load is
   at most what it was with more flows, so no link fills below ``L1``. In the exact simulation
   every flow thus keeps a rate ``>= L1`` while the step lasts.
3. While all of ``e1``'s flows are in flight, ``sum_i w_i r_i <= cap(e1) = sum_i w_i L1`` with
   every ``r_i >= L1`` forces ``r_i = L1``: they move at ``L1`` and, equal in size, are all in
   flight until ``S / L1``. So the exact step's last byte leaves at ``start + S / L1`` and every
   other flow finishes by then (rate ``>= L1``).
4. Coarse holds the start rates: the flows on ``e1`` finish at ``start + S / L1``, every other
   flow earlier. The same step end, so the next step starts at the same moment with the same
   flows, and by induction the whole stream ends at the same time.

**Where it is not a bound** (the counter-example below, worked by hand): rates are not monotone
in the set of flows, so holding a rate can keep a flow *faster* than exact max-min would.
"""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from willitscale.collectives.phases import Phase, Stream, Traffic
from willitscale.errors import ConfigError
from willitscale.fabric.simulator import COARSE_ABOVE_GPUS, choose_fidelity, simulate
from willitscale.fabric.step import ParallelLayout, StepComm, step_traffic
from willitscale.topology import build_topology, parse_routing
from willitscale.topology.graph import TopologyBuilder, VertexKind

G = 1e9


@pytest.fixture(scope="module")
def tapered():
    """A 4:1 fat-tree of 16-port switches, 64 GPUs (8 servers over 6 leaves): ECMP collisions on the uplinks."""
    return build_topology("fat-tree", k=16, nodes=8, gpus_per_node=8, oversubscription=4)


@settings(max_examples=20, deadline=None)
@given(perm_seed=st.integers(0, 2**31), routing_seed=st.integers(0, 1000), repeat=st.integers(1, 3))
def test_coarse_is_exact_for_one_stream_of_equal_flows_started_together(tapered, perm_seed, routing_seed, repeat):
    # the theorem of the module docstring: a random permutation, every flow 100 MB, a step charged
    # its flows' mean path latency after its last byte (latency_mode "mean": the same for both
    # fidelities once the last byte has left at start + S / L1)
    rng = np.random.default_rng(perm_seed)
    n = tapered.gpus
    dst = rng.permutation(n)
    src = np.arange(n)[dst != np.arange(n)]
    dst = dst[dst != np.arange(n)]
    if src.size == 0:
        return
    phase = Phase(src=src, dst=dst, size=np.full(src.size, 100e6), repeat=repeat,
                  latency_mode="mean")
    traffic = Traffic([Stream(name="perm", phases=(phase,))])
    routing = parse_routing("ecmp", seed=routing_seed)
    exact = simulate(tapered, traffic, routing, fidelity="exact", reuse_phases=False)
    coarse = simulate(tapered, traffic, routing, fidelity="coarse", reuse_phases=False)
    assert coarse.completion_time == pytest.approx(exact.completion_time, rel=1e-9)
    assert coarse.fidelity == "coarse" and exact.fidelity == "exact"


def test_coarse_is_exact_for_a_ring_all_reduce_alone(tapered):
    # a ring's steps are equal chunks started together, charged the ring's mean hop latency
    # (the same for both fidelities once the last byte has left): the theorem again
    traffic = step_traffic(tapered, ParallelLayout(tp=8, dp=8), StepComm(dp_bytes=1e9))
    assert [s.name for s in traffic.streams] == ["dp"]
    routing = parse_routing("ecmp", seed=3)
    exact = simulate(tapered, traffic, routing, fidelity="exact")
    coarse = simulate(tapered, traffic, routing, fidelity="coarse")
    assert coarse.completion_time == pytest.approx(exact.completion_time, rel=1e-9)
    assert coarse.solves < exact.solves  # and it got there with fewer solves


def test_both_fidelities_move_the_same_bytes_over_the_same_links(tapered):
    # timing differs, routes and sizes do not: every step's bytes land on its links either way
    traffic = step_traffic(tapered, ParallelLayout(tp=8, pp=2, dp=4),
                           StepComm(tp_bytes=50e6, tp_count=2, pp_bytes=50e6, pp_count=2, dp_bytes=200e6))
    routing = parse_routing("ecmp", seed=1)
    exact = simulate(tapered, traffic, routing, fidelity="exact")
    coarse = simulate(tapered, traffic, routing, fidelity="coarse")
    np.testing.assert_allclose(coarse.link_bytes, exact.link_bytes, rtol=1e-9, atol=1.0)


def _chain():
    """GPUs p, q, r, t; switches Q, R. p-Q 1 GB/s, Q-R 2 GB/s, R-t 1.5 GB/s; q-Q and r-R fast."""
    b = TopologyBuilder()
    p, q, r, t = (b.gpu(name, node=i, local=0) for i, name in enumerate("pqrt"))
    sq, sr = b.vertex("Q", VertexKind.SWITCH), b.vertex("R", VertexKind.SWITCH)
    b.link(p, sq, 1 * G, 0.0, "up", "down")
    b.link(q, sq, 1000 * G, 0.0, "up", "down")
    b.link(sq, sr, 2 * G, 0.0, "mid", "mid")
    b.link(r, sr, 1000 * G, 0.0, "up", "down")
    b.link(t, sr, 1.5 * G, 0.0, "up", "down")
    return b.build(kind="chain", params={}, gpus_per_node=1), (p, q, r, t)


def test_coarse_can_finish_before_exact_so_it_is_no_bound():
    # flows A p->q (0.5 GB, link p-Q), B p->r (1 GB, p-Q and Q-R), C q->t (10 GB, Q-R and R-t),
    # one step. By hand, exact: A = B = 0.5 (p-Q full), C = 2 - 0.5 = 1.5 (Q-R and R-t full).
    # A ends at 1 s; then B and C share Q-R: B = C = 1 (p-Q and Q-R full); B's last 0.5 GB ends
    # at 1.5 s; C has 10 - 1.5 - 0.5 = 8 GB left at 1.5 GB/s (R-t): ends at 1.5 + 8/1.5 = 6.8333 s.
    # Coarse holds C at 1.5 GB/s: 10/1.5 = 6.6667 s, before exact (B, held at 0.5, ends at 2 s).
    topo, (p, q, r, t) = _chain()
    phase = Phase(src=np.array([p, p, q]), dst=np.array([q, r, t]), size=np.array([0.5, 1.0, 10.0]) * G)
    traffic = Traffic([Stream(name="abc", phases=(phase,))])
    exact = simulate(topo, traffic, fidelity="exact")
    coarse = simulate(topo, traffic, fidelity="coarse")
    assert exact.completion_time == pytest.approx(1.5 + 8 / 1.5, rel=1e-9)
    assert coarse.completion_time == pytest.approx(10 / 1.5, rel=1e-9)
    assert coarse.completion_time < exact.completion_time


def test_auto_runs_coarse_only_above_the_threshold():
    assert choose_fidelity("auto", COARSE_ABOVE_GPUS)[0] == "exact"
    fid, why = choose_fidelity("auto", COARSE_ABOVE_GPUS + 1)
    assert fid == "coarse" and f"{COARSE_ABOVE_GPUS:,}" in why and "--fidelity exact" in why
    assert choose_fidelity("exact", 10**6) == ("exact", "asked for (exact)")
    assert choose_fidelity("coarse", 8)[0] == "coarse"
    with pytest.raises(ConfigError, match="fidelity"):
        choose_fidelity("fast", 8)


def test_a_small_simulation_says_it_ran_exact(tapered):
    traffic = step_traffic(tapered, ParallelLayout(tp=8, dp=8), StepComm(dp_bytes=1e8))
    res = simulate(tapered, traffic)
    assert res.fidelity == "exact" and "64 GPUs" in res.fidelity_reason
    # the GPUs that take part are counted, not the highest index: 8 GPUs from GPU 56
    late = step_traffic(tapered, ParallelLayout(tp=8, first_gpu=56), StepComm(tp_bytes=1e6, tp_count=1))
    assert "8 GPUs" in simulate(tapered, late).fidelity_reason


STEP = ["fabric", "simulate", "--topology", "fat-tree", "--k", "16", "--nodes", "8", "--gpus-per-node", "8",
        "--oversubscription", "4", "--routing", "ecmp", "--step", "--tp", "8", "--pp", "2", "--dp", "4",
        "--tp-bytes", "10MB", "--pp-bytes", "10MB", "--dp-bytes", "100MB"]


def test_cli_names_the_fidelity_in_json_and_text(cli):
    code, out, _ = cli(*STEP, "--json")
    assert code == 0
    d = json.loads(out)
    assert d["fidelity"] == "exact" and "64 GPUs" in d["fidelity_reason"]
    code, out, _ = cli(*STEP, "--json", "--fidelity", "coarse")
    assert code == 0 and json.loads(out)["fidelity"] == "coarse"
    code, out, _ = cli(*STEP, "--fidelity", "coarse")
    assert code == 0 and "fidelity: coarse (asked for (coarse))" in out
    code, out, _ = cli("fabric", "simulate", "--topology", "rail-optimized", "--nodes", "2", "--collective",
                       "all_reduce", "--size", "1MB", "--fidelity", "coarse", "--json")
    assert code == 0 and json.loads(out)["fidelity"] == "coarse"
