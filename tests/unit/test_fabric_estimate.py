"""``willitscale estimate --network flow``: the DP all-reduce simulated on the fabric."""

import json

import pytest

from willitscale.fabric import FlowNetwork, cluster_topology, simulate_collective
from willitscale.plan.build import build_scenario
from willitscale.plan.comms import gradient_allreduce
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

    from willitscale.plan.estimate import estimate

    sc = build_scenario({**SETTINGS, "network": "flow", "oversubscription": 4})
    est = estimate(sc)
    ar = gradient_allreduce(sc, 1e9)
    sizes = np.array([span.args["size_bytes"] for span in est.timeline.spans if span.kind == "comm"])
    assert est.comms == pytest.approx(float(np.sum(ar.time(sizes))), rel=1e-9)
    analytic = estimate(build_scenario(SETTINGS))
    assert est.comms != pytest.approx(analytic.comms, rel=1e-3)
