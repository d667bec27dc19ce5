"""The data-parallel estimate on cases derived by hand (derivations beside each assertion)."""

from dataclasses import replace

import pytest

from willitscale.compute.kernels import OPTIMIZER_BYTES_PER_PARAM
from willitscale.errors import ConfigError
from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario

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


def test_overlap_stretches_backward_and_the_all_reduce_ends_the_step():
    # Review A3: when the communication stream is the critical path, the overlap slowdown
    # stretches backward but must not be added on top of the exposed tail. A measured all-reduce
    # of 1 GB in 0.1 s makes the 4e9 B of fp32 gradients take 0.4 s (1e-10 s/B).
    scenario, est = run(nodes=2, allreduce_time=0.1, allreduce_size=1e9)
    s = 0.19  # the documented default slowdown
    compute = 8 * 1e9 * 4096 / (0.5 * A100_BF16)  # 0.21005 s, full recomputation (8PD)
    fwd, bwd = compute / 4, compute * 3 / 4  # forward 2P, backward 4P + recomputed 2P
    total = 0.4
    # Without a shape gradients appear uniformly: the 1 MiB first bucket is ready after
    # r0 = 2^20 / 4e9 of backward and done d0 = 2^20 x 1e-10 s later; the next (25 MiB) is ready
    # at r1 = 26 MiB / 4e9, after which every bucket is ready every 25 MiB/4e9 x ~0.19 s = 1.2 ms
    # but takes 2.6 ms: the stream runs without a gap from r1 x backward to its end. Compute
    # beside it runs s slower: the stretched backward b' = b + s x hidden with
    # hidden = d0 + (1 - r1) b'  =>  b' = (b + s d0) / (1 - s (1 - r1)).
    r1, d0 = 26 * 2**20 / 4e9, 2**20 * 1e-10
    stretched = (bwd + s * d0) / (1 - s * (1 - r1))
    optimizer = 1e9 * OPTIMIZER_BYTES_PER_PARAM / scenario.cluster.gpu.memory_bandwidth
    assert est.breakdown.overlap_slowdown == pytest.approx(stretched - bwd, rel=2e-3)
    # the step ends with the last all-reduce, then the optimizer
    assert est.step_time == pytest.approx(fwd + r1 * stretched + total - d0 + optimizer, rel=1e-4)
    # the slowdown is exactly s x what hides under the (stretched) backward
    assert est.breakdown.overlap_slowdown == pytest.approx(s * (est.comms - est.exposed_comms), rel=1e-3)
    # the old sum compute + s x hidden + exposed + optimizer counted the slowdown twice
    assert est.step_time < compute + s * (total - (total - bwd)) + (total - bwd) + optimizer
    _, off = run(nodes=2, allreduce_time=0.1, allreduce_size=1e9, overlap=False)
    assert off.step_time == pytest.approx(compute + total + optimizer)
    assert est.step_time < off.step_time


def test_step_is_the_later_of_stretched_compute_and_the_last_all_reduce():
    # the default job (review A3's example): step = max(compute + slowdown, last all-reduce end)
    # + optimizer, read off the timeline's own spans
    _, est = run(params=2e9, micro_batch=2, seq_len=2048, nodes=4)
    b = est.breakdown
    last_end = max(span.end for span in est.timeline.spans if span.kind == "comm")
    assert est.step_time == pytest.approx(
        max(b.forward + b.backward + b.overlap_slowdown, last_end) + b.optimizer)


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


# what every plan holds outside PyTorch's tensors: the CUDA context (LitGPT's OOM message:
# 78.93 - 76.28 - 2.14 GiB) and one NCCL communicator of > 2 ranks per group (688 MiB, nccl#964)
CONTEXT = 0.51 * 2**30
NCCL_GROUP = 688 * 2**20
CUBLAS = 8_519_680  # cuBLAS workspace of the compute stream (PyTorch's default config)


def test_memory_without_a_shape_is_the_state_only_and_says_so():
    _, est = run()
    # the plan implies PyTorch DDP under autocast: fp32 weights 4 + fp32 gradients 4 + Adam 8 =
    # 16 B/param, DDP's bucket copy of the gradients (gradient_as_bucket_view=False) 4, and
    # autocast's bf16 weight copies 2 (in --params mode every parameter counts as a matmul
    # weight, as the 6P FLOPs do): 22 x 1e9, + cuBLAS workspace, context, NCCL for the dp group
    assert est.memory.allocated == pytest.approx(22e9 + CUBLAS)
    assert est.memory.total == pytest.approx(22e9 + CUBLAS + CONTEXT + NCCL_GROUP)
    assert est.memory.buffers == pytest.approx(4e9)
    _, view = run(gradient_as_bucket_view=True)
    assert view.memory.allocated == pytest.approx(18e9 + CUBLAS)
    assert est.memory.activations is None and est.unknowns
    _, shaped = run(params=None, model="gpt2-large", seq_len=1024, micro_batch=1)
    assert shaped.memory.activations > 0 and not shaped.unknowns


def test_model_parallel_degrees_need_a_shape_but_zero_does_not():
    with pytest.raises(ConfigError, match="need the model's shape"):
        run(tp=2, dp=4)
    _, ddp = run(nodes=2)
    _, fsdp = run(nodes=2, zero=3)
    # ZeRO-3 alone implies FSDP: fp32 sharded weights 4 + fp32 gradient shard 4 + Adam 8 over 16
    # ranks (no activations, and no layer to gather, in --params mode)
    assert fsdp.memory.framework == "fsdp"
    assert fsdp.memory.state == pytest.approx(16e9 / 16)
    assert ddp.memory.allocated == pytest.approx(22e9 + CUBLAS)  # as above


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
    assert op.bytes == pytest.approx(774_030_080 * 4)
    # GPT-2 Large (h = 1280, 36 layers, tied embeddings), fp32 gradients in ready order. The tied
    # LM head has no gradient of its own yet; final_norm (2,560 params = 10,240 B) and the last
    # layer's MLP down projection (1280 x 5120 + 1280 = 6,554,880 params = 26,219,520 B) close
    # the 1 MiB first bucket. Then in every layer: MLP up (5120 x 1280 + 5120 = 26,234,880 B)
    # reaches 25 MiB = 26,214,400 B alone; norm2 + attention out (6,558,720 B) + qkv
    # (19,676,160 B) + norm1 = 26,255,360 B close the next; the layer below starts with its MLP
    # down (26,219,520 B >= 25 MiB) alone. So 1 + 2 + 3 x 35 = 108 buckets, and the position
    # (5.2 MB) and token (257 MB) embeddings make the 109th, ready last.
    assert op.calls == 109
    # the tied embedding is ready last: exposed >= the last bucket's all-reduce, > 0
    assert est.exposed_comms > 0


def test_timeline_spans_match_the_breakdown():
    _, est = run(nodes=4)
    t = est.timeline
    assert t.step_time == pytest.approx(est.step_time)
    assert t.busy("comms") == pytest.approx(est.comms)
    assert t.busy("idle") == pytest.approx(est.exposed_comms)
