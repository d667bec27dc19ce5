"""One shape path: multi-head latent attention, shared experts, dense-first layers and per-layer
window patterns reach the FLOP count, the per-op compute model (GEMMs of their real shapes),
the tensor-parallel parameter split and the activation memory, and these agree with each other
and with hand derivations from the DeepSeek-V3 config (h 7168, 128 heads, d_qk 192 = 128 nope
+ 64 rope, d_v 128, q_lora 1536, kv_lora 512; 3 dense layers of 18432, 58 MoE layers of 256
experts of 2048, top 8, one shared expert of 2048)."""

from pathlib import Path

import numpy as np
import pytest

from willitscale.compute.model import op_costs
from willitscale.estimation.estimate import estimate
from willitscale.memory.activations import activation_memory
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.step.engine import make_context
from willitscale.workload.flops import layer_forward_flops, training_flops
from willitscale.workload.hf import load_hf_config
from willitscale.workload.params import layer_params_per_tp_rank, param_count

HF = Path(__file__).parent.parent / "data" / "hf_configs"
V3 = str(HF / "deepseek-v3.json")
S = 4096


def _ops(**settings):
    base = {"model": V3, "gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8, "micro_batch": 1,
            "seq_len": S, "global_batch": 8}
    sc = build_scenario(base | settings)
    ctx = make_context(sc)
    ops = op_costs(ctx.spec, PlanBatch.from_plans([sc.plan]), detail=True).ops
    return {o.name: o for o in ops}, sc


def test_forward_matmul_flops_are_twice_the_active_matmul_weights():
    """Per token, the forward matmuls outside the attention core are 2 FLOPs per active weight:
    active 37,552,282,624 less the token embedding 926,679,040 and the norms (61 x (2 x 7168 +
    1536 + 512) = 999,424, final 7,168) = 36,624,596,992 weights -> 73,249,193,984 FLOPs."""
    m = load_hf_config(V3)
    f = training_flops(m, S)
    layer = f.layer_forward
    per_layer = float(layer.qkv + layer.attention_output + layer.mlp + layer.router)
    assert m.layers * per_layer + f.lm_head_forward_per_token == pytest.approx(73_249_193_984, rel=1e-12)


def test_attention_core_runs_qk_at_192_and_av_at_128():
    """Q K^T: 2 keys x 128 x 192 per token; A V: 2 keys x 128 x 128."""
    layer = layer_forward_flops(load_hf_config(V3), S)
    assert float(layer.scores) == 2 * S * 128 * 192
    assert float(layer.values) == 2 * S * 128 * 128


def test_mla_gemms_have_their_real_shapes_under_tp():
    """T = 4096 tokens, tp = 8 with sequence parallelism: the down projections are whole on
    every rank (Megatron-Core's 'duplicated' TELinear) and run on the rank's T/8 tokens before
    the latents are gathered; the up projections split by heads: Q down 2(T/8) x 7168 x 1536,
    Q up 2T x 1536 x 128*192/8, KV down 2(T/8) x 7168 x 576, KV up 2T x 512 x 128*256/8, output
    2T x 128*128/8 x 7168."""
    ops, _ = _ops(tp=8, sequence_parallel=True)
    T = S
    expected = {"Q down": 2 * T / 8 * 7168 * 1536, "Q up": 2 * T * 1536 * 128 * 192 / 8,
                "KV down": 2 * T / 8 * 7168 * 576, "KV up": 2 * T * 512 * 128 * 256 / 8,
                "attention output": 2 * T * 128 * 128 / 8 * 7168}
    for name, flops in expected.items():
        assert float(np.sum(ops[name].flops)) == pytest.approx(flops, rel=1e-12), name
    assert "QKV" not in ops


def test_per_op_gemm_flops_equal_the_flop_count():
    """The per-op model's linear-layer GEMMs and the attention kernel execute exactly the
    workload's FLOPs (causal: the kernel skips masked blocks), tp = ep = 1: one shape, two views."""
    ops, sc = _ops()
    f = training_flops(sc.model, S, causal=True)
    layer = f.layer_forward
    gemms = sum(float(np.sum(o.flops)) for o in ops.values() if o.kind == "gemm" and o.name != "LM head")
    assert gemms == pytest.approx(S * float(layer.qkv + layer.attention_output + layer.mlp + layer.router),
                                  rel=1e-12)
    assert float(np.sum(ops["attention core"].flops)) == pytest.approx(
        S * float(layer.scores + layer.values), rel=1e-12)
    for name in ("shared MLP up", "shared MLP down", "dense MLP up", "dense MLP down"):
        assert name in ops


def test_tp_split_keeps_the_down_projections_whole():
    """tp x per-rank = per-layer + (tp - 1) x what every rank holds whole: the q_a/kv_a down
    projections and their norms (7168*1536 + 1536 + 7168*576 + 512 = 15,140,864), the two norms
    (14,336) and the mean router (58 x 7168*256 / 61)."""
    m = load_hf_config(V3)
    whole = 15_140_864 + 14_336 + 58 * 7168 * 256 / 61
    per_layer = param_count(m).per_layer
    assert 8 * layer_params_per_tp_rank(m, 8) == pytest.approx(per_layer + 7 * whole, rel=1e-12)


def test_mla_activations_keep_the_latents():
    """bf16, s = 4096, b = 1, tp = 1: the attention block keeps its input (7168), Q (128*192),
    K (128*192), V (128*128), the latents (2*1536 + 2*512 + 64 = 4160) and the output
    projection's input (128*128): 2 x 4096 x 93,184 bytes."""
    a = activation_memory(load_hf_config(V3), S, 1)
    assert a.layer_attention == 2 * S * (7168 + 24576 + 24576 + 16384 + 4160 + 16384)


def test_gemma2_attention_counts_its_window_on_half_the_layers():
    """Gemma 2 9B at s = 8192: 21 of 42 layers see 4096 keys, 21 see 8192 -> mean 6144 keys
    per query (full counting); Q K^T = 2 x 6144 x 4096 FLOPs per token."""
    g = load_hf_config(HF / "gemma-2-9b.json")
    assert float(layer_forward_flops(g, 8192).scores) == 2 * 6144 * 4096


def test_deepseek_v2_lite_estimate_runs_with_expert_parallelism():
    sc = build_scenario({"model": str(HF / "deepseek-v2-lite.json"), "gpu": "h100-sxm", "nodes": 1,
                         "gpus_per_node": 8, "ep": 8, "micro_batch": 1, "seq_len": 4096,
                         "global_batch": 64, "zero": 1})
    est = estimate(sc)
    assert est.step_time > 0 and 0 < est.mfu < 1


def test_dense_first_layers_send_no_tokens():
    """Expert all-to-all bytes scale with the MoE layers: DeepSeek-V2-Lite has 26 of 27 (the
    first is dense), so making every layer MoE (dense_layers 0, same widths) multiplies the
    bytes by 27/26."""
    from dataclasses import replace

    from willitscale.scenario.build import build_scenario as build

    settings = {"gpu": "h100-sxm", "nodes": 2, "gpus_per_node": 8, "ep": 8, "micro_batch": 1,
                "seq_len": 4096, "global_batch": 64, "zero": 1, "recompute": "none"}
    lite = load_hf_config(HF / "deepseek-v2-lite.json")
    all_moe = replace(lite, dense_layers=0)
    ep = []
    for model in (lite, all_moe):
        sc = build(settings | {"model": str(HF / "deepseek-v2-lite.json")})
        est = estimate(replace(sc, model=model))
        ep.append(sum(c.bytes for c in est.comm_ops if c.parallelism == "ep"))
    assert ep[0] > 0
    assert ep[1] / ep[0] == pytest.approx(27 / 26, rel=1e-9)


def test_the_first_stage_holds_the_dense_layers():
    """DeepSeek-V3 on 9 pipeline stages: 61 + 2 = 63 = 9 x 7, so the first stage holds the
    embedding and layers 0-5 (3 dense of 583,483,392 parameters, 3 MoE of 11,507,286,016), a
    middle stage 7 MoE layers. Weights per GPU (ZeRO 0, tp = ep = 1) are in the ratio of those
    parameters: (7 x 11,507,286,016) / (926,679,040 + 3 x 583,483,392 + 3 x 11,507,286,016);
    the mean layer (10,970,049,821) would have put 6 of them on the first stage."""
    from willitscale.step.evaluate import evaluate
    from willitscale.workload.stages import stage_dense_layers

    sc = build_scenario({"model": V3, "gpu": "h100-sxm", "nodes": 9, "gpus_per_node": 8, "pp": 9,
                         "zero": 0, "micro_batch": 1, "seq_len": S, "global_batch": 72,
                         "recompute": "full"})
    mem = evaluate(sc, PlanBatch.from_plans([sc.plan]), memory_only=True).memory
    first, middle = 926_679_040 + 3 * 583_483_392 + 3 * 11_507_286_016, 7 * 11_507_286_016
    assert mem.weights[0, 1] / mem.weights[0, 0] == pytest.approx(middle / first, rel=1e-12)
    # the spread when the first stage has no room for all the dense layers: 2 of 5 on it,
    # the other 3 over the remaining 8 layers in proportion (4 + 4 -> 1.5 each)
    np.testing.assert_allclose(stage_dense_layers(5, 10, np.array([[2.0, 4.0, 4.0]])), [[2.0, 1.5, 1.5]])


def test_the_first_stage_gradient_buckets_hold_its_dense_layers():
    """The first of 9 stages of DeepSeek-V3 (6 layers and the embedding, tp = ep = 1): its
    gradient buckets hold 926,679,040 + 3 x 583,483,392 + 3 x 11,507,286,016 parameters (fp32
    gradients: 4 bytes each), a middle stage's 7 x 11,507,286,016."""
    from willitscale.step.data import stage_buckets

    m = load_hf_config(V3)
    grad = 4
    cap = 25 * 2**20
    first = stage_buckets(m, S, True, (6, 1, 0, 0, 1, 1, 0), 0.0, grad, cap, cap)
    middle = stage_buckets(m, S, True, (7, 0, 0, 0, 1, 1, 0), 0.0, grad, cap, cap)
    assert float(np.sum(first[0] + first[1])) == 4 * (926_679_040 + 3 * 583_483_392 + 3 * 11_507_286_016)
    assert float(np.sum(middle[0] + middle[1])) == 4 * 7 * 11_507_286_016


def _random_shapes():
    from hypothesis import strategies as st

    from willitscale.workload.transformer import Transformer

    @st.composite
    def shape(draw):
        layers = draw(st.integers(2, 12))
        heads = draw(st.sampled_from([2, 4, 8]))
        experts = draw(st.sampled_from([0, 4, 8]))
        mla = draw(st.booleans())
        fields = dict(name="r", layers=layers, hidden=heads * 16, heads=heads, vocab=97,
                      gated_mlp=draw(st.booleans()), position="rope", norm="rmsnorm", bias=False,
                      ffn_hidden=draw(st.sampled_from([32, 48, 64])),
                      layer_norms=draw(st.sampled_from([2, 4])), tied_embeddings=draw(st.booleans()))
        if mla:
            fields |= dict(kv_lora_rank=draw(st.sampled_from([8, 16])), head_dim=24, rope_head_dim=8,
                           v_head_dim=draw(st.sampled_from([16, 24])),
                           q_lora_rank=draw(st.sampled_from([None, 12])))
        else:
            fields |= dict(qk_norm=draw(st.sampled_from(["none", "head", "full"])))
        if experts:
            fields |= dict(moe_experts=experts, moe_top_k=draw(st.integers(1, experts)),
                           moe_shared_ffn=(shared := draw(st.sampled_from([0, 32]))),
                           moe_shared_gate=bool(shared) and draw(st.booleans()),
                           dense_layers=draw(st.integers(0, layers)), dense_ffn=96)
        return Transformer(**fields)

    return shape()


def test_layer_kinds_and_the_mean_layer_add_up_to_the_model():
    """For random MLA / MoE / dense-first shapes: layers x the mean layer on one rank, and the
    dense-first and MoE layers counted by kind, are both the model's layers_total; tp ranks hold
    at least the whole layer between them."""
    from hypothesis import given, settings

    @settings(max_examples=60, deadline=None)
    @given(_random_shapes())
    def check(m):
        p = param_count(m)
        assert m.layers * layer_params_per_tp_rank(m, 1) == pytest.approx(p.layers_total, rel=1e-12)
        dense = m.layers - m.moe_layers
        by_kind = dense * layer_params_per_tp_rank(m, 1, kind="dense") + m.moe_layers * (
            layer_params_per_tp_rank(m, 1, kind="moe"))
        assert by_kind == pytest.approx(p.layers_total, rel=1e-12)
        assert 2 * layer_params_per_tp_rank(m, 2) >= p.per_layer - 1e-6

    check()


def test_per_op_gemms_execute_the_workload_flops_for_random_shapes():
    """The per-op model's linear GEMMs and attention kernel run exactly training_flops' forward
    FLOPs (causal) for random MLA / MoE / dense-first / QK-norm shapes, tp = ep = 1."""
    from dataclasses import replace

    from hypothesis import given, settings

    from willitscale.compute.model import layer_spec

    base = build_scenario({"model": "llama3-8b", "gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 1,
                           "micro_batch": 1, "seq_len": 256, "global_batch": 1})

    @settings(max_examples=25, deadline=None)
    @given(_random_shapes())
    def check(m):
        sc = replace(base, model=m)
        ops = op_costs(layer_spec(sc), PlanBatch.from_plans([sc.plan]), detail=True).ops
        layer = training_flops(m, 256, causal=True).layer_forward
        gemms = sum(float(np.sum(o.flops)) for o in ops if o.kind == "gemm" and o.name != "LM head")
        linear = float(layer.qkv + layer.attention_output + layer.mlp + layer.router)
        assert gemms == pytest.approx(256 * linear, rel=1e-12)
        core = sum(float(np.sum(o.flops)) for o in ops if o.name == "attention core")
        assert core == pytest.approx(256 * float(layer.scores + layer.values), rel=1e-12)

    check()


def test_stage_activations_count_dense_and_moe_layers_as_what_they_are():
    """DeepSeek-V3 on 9 stages, no recomputation, one micro-batch in flight per stage counted
    apart: the first stage keeps 3 dense-layer and 3 MoE-layer activations (plus the
    embedding's), a middle stage 7 MoE layers', each as activation_memory counts that layer."""
    from dataclasses import replace

    from willitscale.step.evaluate import evaluate

    m = load_hf_config(V3)
    sc = build_scenario({"model": V3, "gpu": "h100-sxm", "nodes": 9, "gpus_per_node": 8, "pp": 9,
                         "zero": 0, "micro_batch": 1, "seq_len": S, "global_batch": 72,
                         "recompute": "none"})
    mem = evaluate(sc, PlanBatch.from_plans([sc.plan]), memory_only=True).memory
    dense = activation_memory(replace(m, moe_experts=0, moe_top_k=0, moe_shared_ffn=0,
                                      dense_layers=0, ffn_hidden=18432, dense_ffn=None), S, 1)
    moe = activation_memory(replace(m, dense_layers=0, dense_ffn=None), S, 1)
    mean = activation_memory(m, S, 1)
    first = 3 * dense.per_layer + 3 * moe.per_layer + mean.embedding
    ratio = mem.activations[0, 1] / mem.activations[0, 0]
    in_flight = ratio * first / (7 * moe.per_layer)  # middle over first, per micro-batch in flight
    assert moe.per_layer > dense.per_layer
    # 1F1B: the first stage holds pp micro-batches in flight, the second pp - 1
    assert in_flight == pytest.approx(8 / 9, rel=1e-9)


def test_stage_compute_counts_dense_and_moe_layers_as_what_they_are():
    """The per-op model times DeepSeek-V2-Lite's dense-first and MoE layers each with its own op
    list. On one stage (all 27 layers) that is the mean layer's time x 27 (the mean layer's ops
    are the kinds' ops weighted by their share: 1/27 dense, 26/27 MoE); on 3 stages of 9 layers
    the first holds the dense layer, so a later stage (9 MoE layers) runs longer than the mean
    layer x 9 says, since a MoE layer here is slower than the dense one."""
    from dataclasses import replace

    from willitscale.step.evaluate import run

    lite = str(HF / "deepseek-v2-lite.json")
    base = {"model": lite, "gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8, "micro_batch": 1,
            "seq_len": S, "global_batch": 64, "zero": 1, "recompute": "none", "ep": 8}

    def compute(settings, kinds: bool):
        sc = build_scenario(base | settings)
        ctx = make_context(sc)
        assert ctx.kind_specs is not None
        ctx = ctx if kinds else replace(ctx, kind_specs=None)
        return float(run(ctx, PlanBatch.from_plans([sc.plan])).compute[0])

    assert compute({}, True) == pytest.approx(compute({}, False), rel=1e-9)
    three = {"pp": 3, "nodes": 3}
    assert compute(three, True) > compute(three, False)


def test_expert_all_to_alls_run_on_the_moe_layers_each_stage_holds():
    # DeepSeek-V3, 61 layers on pp 7: stages of 8, 9, 9, 9, 9, 9, 8 layers; its 3 dense-first
    # layers all sit on the first stage, which so holds 5 MoE layers against 9 in a middle
    # stage: the expert all-to-all bytes per micro-batch of column 1 (a middle stage) over
    # column 0 (the first) are 9 / 5, and the last stage's 8 / 9 of a middle one's
    from willitscale.scenario.batch import PlanBatch
    from willitscale.step.engine import make_context
    from willitscale.step.evaluate import run

    sc = build_scenario({"model": "deepseek-v3", "gpu": "h100-sxm", "nodes": 7, "gpus_per_node": 8,
                         "tp": 1, "pp": 7, "ep": 8, "dp": 8, "global_batch": 448, "micro_batch": 1,
                         "seq_len": 4096})
    ctx = make_context(sc)
    b = PlanBatch.from_plans([sc.plan])
    res = run(ctx, b, detail=True)
    assert res.detail.layers[0].tolist() == [8, 9, 8]
    ep = res.detail.traffic["ep"].bytes[0]
    assert ep[1] / ep[0] == pytest.approx(9 / 5, rel=1e-12)
    assert ep[2] / ep[1] == pytest.approx(8 / 9, rel=1e-12)
