"""The estimate-facing API: a cluster's fabric and the affine time model of a collective."""

import numpy as np
import pytest

from willitscale.fabric import (
    cluster_topology,
    flow_collective_model,
    simulate_collective,
)
from willitscale.hardware import build_cluster
from willitscale.topology import parse_routing


def test_cluster_topology_takes_the_nodes_links():
    t = cluster_topology(build_cluster(preset="dgx-h100", nodes=4))
    # dgx-h100: 8 x ib-ndr (50 GB/s x 0.92 achievable) for 8 GPUs -> 46 GB/s per GPU NIC link
    assert (t.gpus, t.gpus_per_node) == (32, 8)
    nic = t.link_capacity[np.asarray(t.tiers)[t.link_tier] == "gpu->leaf"]
    assert np.allclose(nic, 46e9)


def test_affine_model_is_exact_for_one_collective():
    t = cluster_topology(build_cluster(preset="dgx-h100", nodes=4), oversubscription=2)
    rt = parse_routing("ecmp", seed=2)
    m = flow_collective_model(t, "all_reduce", routing=rt, placement="flat")
    for size in (1e6, 3.7e8, 5e9):  # off the two reference sizes (1 and 2 GB)
        direct = simulate_collective(t, "all_reduce", size, routing=rt, placement="flat").completion_time
        assert float(m.time(size)) == pytest.approx(direct, rel=1e-9)
    assert m.time(np.array([0.0, 1e9])).tolist()[0] == 0.0
    groups = [[0, 8, 16, 24], [1, 9, 17, 25]]  # two DP groups on rails 0 and 1
    g = flow_collective_model(t, "all_reduce", routing=rt, groups=groups)
    assert g.call.ranks == 4 and g.per_byte > 0


def test_channels_run_in_lockstep_so_every_affine_model_is_exact():
    # review-2 FB2: the line through 1 and 2 GB is exact because step k of every channel and
    # group is one phase (it ends when its last byte arrives anywhere), so each step lasts
    # c_k x size + latency. A ring all_reduce over 2 servers x 8 GPUs: 8 channels x 16 flows in
    # one phase, repeated 2(16 - 1) = 30 times.
    from willitscale.fabric.traffic import call_phases, collective_call

    t = cluster_topology(build_cluster(preset="dgx-h100", nodes=2), oversubscription=2)
    (phase,) = call_phases(t, collective_call(t, "all_reduce", 1e9))
    assert phase.flows == 8 * 16 and set(phase.key.tolist()) == set(range(8)) and phase.repeat == 30
    rt = parse_routing("ecmp", seed=2)
    for op, algorithm in (("all_reduce", "tree"), ("all_to_all", None), ("broadcast", None),
                          ("all_reduce", "hierarchical")):  # steps charged their slowest flow, trees, phases
        m = flow_collective_model(t, op, routing=rt, algorithm=algorithm, placement="flat")
        for size in (1e4, 3.7e8):
            direct = simulate_collective(t, op, size, routing=rt, algorithm=algorithm,
                                         placement="flat").completion_time
            assert float(m.time(size)) == pytest.approx(direct, rel=1e-9)
