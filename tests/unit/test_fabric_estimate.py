"""``willitscale estimate --network flow``: the DP all-reduce simulated on the fabric."""

import json

import pytest

from willitscale.estimation.comms import gradient_allreduce
from willitscale.fabric import FlowNetwork, cluster_topology, simulate_collective
from willitscale.scenario.build import build_scenario
from willitscale.topology import parse_routing

SETTINGS = {"preset": "dgx-h100", "nodes": 2, "model": "gpt2-xl", "micro_batch": 4}


def test_flow_bucket_times_are_the_simulated_all_reduce():
    sc = build_scenario({**SETTINGS, "network": "flow", "routing": "spray"})
    ar = gradient_allreduce(sc, 1e9)
    for bucket in (25 * 2**20, 4e8):
        direct = simulate_collective(cluster_topology(sc.cluster), "all_reduce", bucket,
                                     routing=parse_routing("spray")).completion_time
        assert float(ar.time([bucket])[0]) == pytest.approx(direct, rel=1e-9)
    assert "flow-simulated" in ar.algorithm


def test_estimate_cli_flow_and_errors(cli):
    argv = ["estimate", "--preset", "dgx-h100", "--nodes", "2", "--model", "gpt2-xl", "--micro-batch", "4"]
    code, out, _ = cli(*argv, "--network", "flow", "--oversubscription", "4", "--json")
    assert code == 0
    op = json.loads(out)["comm_ops"][0]
    assert "flow" in op["why"] and op["time_s"] > 0
    code, _, err = cli(*argv, "--topology", "fat-tree")
    assert code == 2 and "--network flow" in err
    code, _, err = cli(*argv, "--network", "flow", "--topology", "torus")
    assert code == 2 and "rail-optimized" in err


def test_flow_network_validates():
    with pytest.raises(Exception, match="oversubscription"):
        FlowNetwork(topology="rail-only", oversubscription=2)


def test_the_step_uses_the_simulated_all_reduce():
    # the engine's DP comm time is the flow model's per bucket, summed (same buckets as DDP)
    import numpy as np

    from willitscale.estimation.estimate import estimate

    sc = build_scenario({**SETTINGS, "network": "flow", "oversubscription": 4})
    est = estimate(sc)
    ar = gradient_allreduce(sc, 1e9)
    sizes = np.array([span.args["size_bytes"] for span in est.timeline.spans if span.kind == "comm"])
    assert est.comms == pytest.approx(float(np.sum(ar.time(sizes))), rel=1e-9)
    analytic = estimate(build_scenario(SETTINGS))
    assert est.comms != pytest.approx(analytic.comms, rel=1e-3)


def test_flow_network_fat_tree_keeps_its_oversubscription():
    # --topology fat-tree --oversubscription 4 used to be accepted and then ignored. 2 DGX H100 =
    # 16 GPUs at 4:1: the smallest even k whose leaves hold them is 6 (leaf 4 down / 1 up,
    # 4 + 1 <= 6 < 5 + 2; 6 leaves x 4 = 24 >= 16; k = 4 holds 4 x 3 = 12)
    sc = build_scenario({**SETTINGS, "network": "flow", "topology": "fat-tree", "oversubscription": 4})
    t = sc.network.build(sc.cluster)
    assert (t.params["k"], t.params["spines"], t.params["effective_oversubscription"]) == (6, 1, 4)
    assert "4:1 at the leaf" in sc.network.describe()
