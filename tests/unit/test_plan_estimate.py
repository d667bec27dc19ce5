"""The data-parallel estimate on cases derived by hand (derivations beside each assertion)."""

from dataclasses import replace

import pytest

from willitscale.errors import ConfigError
from willitscale.plan.build import build_scenario
from willitscale.plan.estimate import OPTIMIZER_BYTES_PER_PARAM, estimate

BASE = {"params": 1e9, "gpu": "a100-80gb", "gpus_per_node": 8, "inter_node": "200Gbps",
        "micro_batch": 4, "seq_len": 1024, "hfu": 0.5, "recompute": "full"}
A100_BF16 = 312e12  # dense bf16 peak, NVIDIA A100 datasheet


def run(**overrides):
    scenario = build_scenario({**BASE, **overrides})
    return scenario, estimate(scenario)


def test_one_gpu_is_compute_plus_optimizer():
    scenario, est = run(gpus_per_node=1)
    # 8 P D with full recomputation: 8 x 1e9 x (4 x 1024) = 3.2768e13 FLOPs at 0.5 x 312e12
    assert est.compute == pytest.approx(8 * 1e9 * 4096 / (0.5 * A100_BF16))
    assert est.comms == 0 and est.exposed_comms == 0
    # fused AdamW: 28 B per parameter at the A100 80GB's HBM bandwidth (catalog input)
    optimizer = 1e9 * OPTIMIZER_BYTES_PER_PARAM / scenario.cluster.gpu.memory_bandwidth
    assert est.step_time == pytest.approx(est.compute + optimizer)
    assert est.bottleneck.resource == "compute"


def test_mfu_knob_ignores_recomputation_and_hfu_knob_counts_it():
    _, full = run(gpus_per_node=1, hfu=None, mfu=0.4)
    _, none = run(gpus_per_node=1, hfu=None, mfu=0.4, recompute="none")
    # MFU: 6 P D / (0.4 x peak) whatever is recomputed
    assert full.compute == pytest.approx(6 * 1e9 * 4096 / (0.4 * A100_BF16))
    assert none.compute == pytest.approx(full.compute)
    _, hfu_full = run(gpus_per_node=1)
    _, hfu_none = run(gpus_per_node=1, recompute="none")
    # HFU: executed FLOPs 8PD vs 6PD
    assert hfu_full.compute / hfu_none.compute == pytest.approx(8 / 6)


def test_reported_mfu_is_model_flops_over_step_time_and_peak():
    _, est = run(nodes=2)
    assert est.mfu == pytest.approx(6 * 1e9 * 4096 / (est.step_time * A100_BF16))
    assert est.hfu == pytest.approx(8 * 1e9 * 4096 / (est.step_time * A100_BF16))
    # 2 nodes x 8 GPUs x 4 samples x 1024 tokens per step
    assert est.tokens_per_s == pytest.approx(2 * 8 * 4 * 1024 / est.step_time)


def test_breakdown_adds_up_and_backward_is_three_quarters_with_full_recompute():
    _, est = run(nodes=2)
    b = est.breakdown
    assert b.total == pytest.approx(est.step_time)
    # forward 2P, backward 4P + recomputed forward 2P per token: backward = 6/8 of compute
    assert b.backward == pytest.approx(0.75 * est.compute)
    assert b.bubble == 0


def test_measured_allreduce_scales_with_bytes():
    # 1e9 fp32 gradients = 4e9 B; measured 2 GB in 0.1 s -> 0.2 s whatever the buckets
    _, est = run(nodes=2, allreduce_time=0.1, allreduce_size=2e9)
    assert est.comms == pytest.approx(0.2)
    # bf16 gradients halve the bytes: 0.1 s
    _, est16 = run(nodes=2, allreduce_time=0.1, allreduce_size=2e9, grad_reduce_dtype="bf16")
    assert est16.comms == pytest.approx(0.1)


def test_no_overlap_exposes_everything_and_has_no_slowdown():
    _, est = run(nodes=4, overlap=False)
    assert est.exposed_comms == pytest.approx(est.comms)
    assert est.breakdown.overlap_slowdown == 0
    assert est.step_time == pytest.approx(est.compute + est.comms + est.breakdown.optimizer)


def test_overlap_hides_what_runs_under_backward():
    _, on = run(nodes=4)
    _, off = run(nodes=4, overlap=False)
    # slowdown = 0.19 x hidden communication (the documented default)
    assert on.breakdown.overlap_slowdown == pytest.approx(0.19 * (on.comms - on.exposed_comms))
    assert on.step_time < off.step_time


def test_gradient_accumulation_syncs_once():
    _, one = run(nodes=2, allreduce_time=0.1, allreduce_size=2e9)
    _, four = run(nodes=2, allreduce_time=0.1, allreduce_size=2e9, grad_accum=4)
    assert four.comms == pytest.approx(one.comms)  # same gradients, synced once per step
    assert four.compute == pytest.approx(4 * one.compute)
    assert four.global_batch == 4 * one.global_batch


def test_strong_scaling_from_global_batch():
    # 64 samples over 1 node of 8 at micro-batch 2: 64 / (2 x 8) = 4 accumulation steps
    scenario, _ = run(global_batch=64, micro_batch=2)
    assert scenario.plan.grad_accum == 4
    with pytest.raises(ConfigError, match="disagrees"):
        build_scenario({**BASE, "nodes": 4, "micro_batch": 2, "grad_accum": 1, "global_batch": 16})


def test_data_loading_not_overlapped_adds_its_time():
    # 4 samples x 1 MB per GPU per step; 8 GPUs share 1 GB/s: 125 MB/s each -> 0.032 s
    _, base = run()
    _, loaded = run(sample_bytes=1e6, storage_bandwidth=1e9, data_overlapped=False)
    assert loaded.breakdown.data_loading == pytest.approx(0.032)
    assert loaded.step_time == pytest.approx(base.step_time + 0.032)
    # prefetched, it hides behind a ~0.2 s step
    _, hidden = run(sample_bytes=1e6, storage_bandwidth=1e9)
    assert hidden.breakdown.data_loading == 0
    # a very slow store becomes the bottleneck: 4 MB at 1 MB/s per node / 8 GPUs = 32 s
    _, slow = run(sample_bytes=1e6, storage_bandwidth=1e6)
    assert slow.bottleneck.resource == "storage"


def test_memory_without_a_shape_is_the_state_only_and_says_so():
    _, est = run()
    # handbook-18 with fp32 gradients: 18 bytes x 1e9
    assert est.memory.total == pytest.approx(18e9)
    assert est.memory.activations is None and est.unknowns
    _, shaped = run(params=None, model="gpt2-large", seq_len=1024, micro_batch=1)
    assert shaped.memory.activations > 0 and not shaped.unknowns


def test_model_parallel_degrees_need_a_shape_but_zero_does_not():
    with pytest.raises(ConfigError, match="need the model's shape"):
        run(tp=2, dp=4)
    _, ddp = run(nodes=2)
    _, fsdp = run(nodes=2, zero=3)
    # ZeRO-3 over 16 ranks: 18 B/param / 16 of state (no activations in --params mode)
    assert fsdp.memory.weights + fsdp.memory.gradients + fsdp.memory.optimizer == pytest.approx(18e9 / 16)
    assert ddp.memory.total == pytest.approx(18e9)


def test_plan_must_fill_the_cluster():
    with pytest.raises(ConfigError, match="but the cluster has 16 GPUs"):
        run(nodes=2, dp=8)


def test_a_faster_inter_node_link_shortens_comms():
    scenario, slow = run(nodes=4)
    node = scenario.cluster.node
    fast_node = replace(node, nic=replace(node.nic, bandwidth=node.nic.bandwidth * 4))
    fast = estimate(replace(scenario, cluster=replace(scenario.cluster, node=fast_node)))
    assert fast.comms < slow.comms and fast.step_time <= slow.step_time


def test_shape_mode_buckets_follow_pytorch_caps():
    _, est = run(params=None, model="gpt2-large", seq_len=1024, micro_batch=1, nodes=2)
    op = est.comm_ops[0]
    # 774,030,080 fp32 gradients = 3.096 GB. Every bucket but the last closes at >= its cap
    # (1 MiB first, then 25 MiB = 26,214,400 B), so there are at most 2 + 3.096e9 / 26,214,400
    # = 120 of them; fewer, since a bucket overshoots its cap by its last tensor.
    assert op.bytes == pytest.approx(774_030_080 * 4)
    assert 2 <= op.calls <= 120
    # the tied embedding is ready last: exposed >= the last bucket's all-reduce, > 0
    assert est.exposed_comms > 0


def test_timeline_spans_match_the_breakdown():
    _, est = run(nodes=4)
    t = est.timeline
    assert t.step_time == pytest.approx(est.step_time)
    assert t.busy("comms") == pytest.approx(est.comms)
    assert t.busy("idle") == pytest.approx(est.exposed_comms)
