"""``willitscale estimate --network flow``: every group simulated on the fabric (step/flow_network.py)."""

import json

import numpy as np
import pytest

from willitscale.collectives.line_time import with_contention
from willitscale.collectives.lines import cluster_links, collective_lines
from willitscale.estimation.comms import gradient_allreduce
from willitscale.fabric import FlowNetwork
from willitscale.scenario.build import build_scenario
from willitscale.step.flow_network import network_for
from willitscale.topology.placement import group_placement

SETTINGS = {"preset": "dgx-h100", "nodes": 2, "model": "gpt2-xl", "micro_batch": 4}


def test_bucket_times_are_the_analytic_ones_slowed_by_the_fabric():
    # DDP over 16 GPUs of 2 nodes on a 4:1 fat-tree: each bucket costs NCCL's pick and achieved
    # time with its bytes term x the simulated slowdown of the DP group
    sc = build_scenario({**SETTINGS, "network": "flow", "topology": "fat-tree", "oversubscription": 4})
    ar = gradient_allreduce(sc, 1e9)
    slowdown = network_for(sc).plan_flow(sc).slowdown("dp_ar")
    assert slowdown > 1.0  # 4:1: the rings' cross-leaf hops share the leaf's uplinks
    links = cluster_links(sc)
    deg = {k: np.array([1]) for k in ("tp", "cp", "ep", "pp")} | {"dp": np.array([16])}
    lines = collective_lines("all_reduce", group_placement("dp", deg, 8), links)
    slowed = with_contention(lines, slowdown)
    from willitscale.collectives.line_time import line_time

    for bucket in (25 * 2**20, 4e8):
        assert float(ar.time([bucket])[0]) == pytest.approx(float(line_time(slowed, np.array([bucket]))[0]))
        assert float(ar.time([bucket])[0]) > float(line_time(lines, np.array([bucket]))[0])
    assert "flow simulation" in ar.why


def test_estimate_cli_flow_and_errors(cli):
    argv = ["estimate", "--preset", "dgx-h100", "--nodes", "2", "--model", "gpt2-xl", "--micro-batch", "4"]
    code, out, _ = cli(*argv, "--network", "flow", "--oversubscription", "4", "--json")
    assert code == 0
    data = json.loads(out)
    assert "flow" in data["comm_ops"][0]["why"] and data["comm_ops"][0]["time_s"] > 0
    assert [g["group"] for g in data["network"]["groups"]] == ["dp_ar"]
    code, _, err = cli(*argv, "--topology", "fat-tree")
    assert code == 2 and "--network flow" in err
    code, _, err = cli(*argv, "--network", "flow", "--topology", "torus")
    assert code == 2 and "rail-optimized" in err


def test_flow_network_validates():
    with pytest.raises(Exception, match="oversubscription"):
        FlowNetwork(topology="rail-only", oversubscription=2)


def test_the_flow_step_is_never_faster_and_names_its_groups():
    from willitscale.estimation.estimate import estimate

    sc = build_scenario({**SETTINGS, "network": "flow", "topology": "fat-tree", "oversubscription": 4})
    est = estimate(sc)
    analytic = estimate(build_scenario(SETTINGS))
    assert est.comms > analytic.comms and est.step_time >= analytic.step_time
    assert est.network["fabric"] == sc.network.describe()


def test_flow_network_fat_tree_keeps_its_oversubscription():
    # --topology fat-tree --oversubscription 4 used to be accepted and then ignored. 2 DGX H100 =
    # 16 GPUs at 4:1: the smallest even k whose leaves hold them is 6 (leaf 4 down / 1 up,
    # 4 + 1 <= 6 < 5 + 2; 6 leaves x 4 = 24 >= 16; k = 4 holds 4 x 3 = 12)
    sc = build_scenario({**SETTINGS, "network": "flow", "topology": "fat-tree", "oversubscription": 4})
    t = sc.network.build(sc.cluster)
    assert (t.params["k"], t.params["spines"], t.params["effective_oversubscription"]) == (6, 1, 4)
    assert "4:1 at the leaf" in sc.network.describe()


@pytest.mark.slow
def test_acceptance_tp_pp_dp_each_simulated_on_the_fabric(cli):
    # issue 14's acceptance: GPT-3 175B on 128 x 8 A100 (TP8 PP8 DP16) on a 4:1 fat-tree
    code, out, err = cli("estimate", "--model", "gpt3-175b", "--gpu", "a100-80gb", "--nodes", "128",
                         "--gpus-per-node", "8", "--tp", "8", "--pp", "8", "--dp", "16",
                         "--global-batch", "1536", "--seq-len", "2048", "--recompute", "full",
                         "--network", "flow", "--topology", "fat-tree", "--oversubscription", "4", "--json")
    assert code == 0, err
    groups = {g["parallelism"]: g for g in json.loads(out)["network"]["groups"]}
    assert {"tp", "pp"} <= set(groups) and ({"dp", "shard"} & set(groups))
    for g in groups.values():
        assert g["simulated_s"] > 0 and g["slowdown"] >= 1.0
    # TP 8 fills a node: NVLink only, as fast as on the ideal fabric
    assert not groups["tp"]["leaves_node"] and groups["tp"]["slowdown"] == 1.0
    # PP: stage k's GPU sends to the GPU 8 x 16 = 128 ranks (16 nodes) on, under another leaf.
    # The fabric is the smallest 2-tier k-ary fat-tree holding 1,024 GPUs at 4:1: k = 38, a
    # leaf with 30 GPU ports and 8 uplinks (3.75:1). A leaf holding no last-stage GPU has 30
    # sending GPUs and 8 uplinks of one NIC's speed, so its flows get at most 8/30 of a NIC:
    # slowdown >= 30 / 8 = 3.75 (ECMP collisions make it worse, never better)
    assert groups["pp"]["slowdown"] >= 30 / 8
    assert any(row["tier"] == "leaf->spine" for row in groups["pp"]["links"])


def test_the_planner_re_estimates_its_best_plans_on_the_fabric():
    # plan --network flow: the sweep is analytic, then the FLOW_TOP best plans are re-run on the
    # simulated fabric and re-ranked; each of those shows the figure the flow estimate gives it
    from willitscale.plan.search import FLOW_TOP, SearchSpace, search
    from willitscale.step.engine import make_context
    from willitscale.step.evaluate import run

    settings = {"preset": "dgx-h100", "nodes": 2, "model": "llama2-7b", "seq_len": 1024,
                "network": "flow", "topology": "fat-tree", "oversubscription": 4}
    sc = build_scenario(settings)
    result = search(sc, gpus=16, global_batch=64, space=SearchSpace(max_micro_batch=2))
    assert "re-estimated" in result.extra["network"]
    top = result.ranked[:FLOW_TOP]
    flow = run(make_context(sc), result.batch.take(top)).step_time
    assert np.allclose(result.step_time[top], flow, rtol=1e-12)
    steps = result.step_time[top]
    assert np.all(np.diff(steps[result.extra["verdict"][top] == 0]) >= 0)  # fitting plans ranked by step
