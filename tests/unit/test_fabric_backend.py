"""The estimate-facing API: a cluster's fabric and the affine time model of a collective."""

import numpy as np
import pytest

from willitscale.fabric import cluster_topology, flow_collective_model, simulate_collective
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
