"""The layers a stage holds, not the mean layer: the largest unit a gather holds at once and the
stage's matmul weights (memory.layers), for a small dense-first MoE and for DeepSeek-V3.

Every expected number is derived by hand below from the shapes (Megatron layout: column- and
row-parallel matrices split over tp, norms and the router whole on every rank)."""

from pathlib import Path

import numpy as np
import pytest

from willitscale.memory.layers import stage_layer_params
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.workload.hf import load_hf_config
from willitscale.workload.params import param_count
from willitscale.workload.transformer import Transformer

V3 = str(Path(__file__).parent.parent / "data" / "hf_configs" / "deepseek-v3.json")

# A 4-layer model, hidden 64, 4 heads of 16 (q = k = v = 64 wide), RMSNorm (64 parameters, two
# per layer: 128), no biases, gated MLPs; the first 2 layers dense (width 128), the last 2 MoE
# (8 experts of width 32, router 64 x 8 = 512).
#   attention, tp 1: q, k, v, o = 4 x 64 x 64                    = 16,384
#   dense layer:     16,384 + 3 x 64 x 128 (24,576) + 128         = 41,088  (matmuls 40,960)
#   MoE layer:       16,384 + 8 x 3 x 64 x 32 (49,152) + 128 + 512 = 66,176 (matmuls 65,536)
#   the mean layer:  (2 x 41,088 + 2 x 66,176) / 4                 = 53,632
# tp 2 (2 heads per rank), ep 4:
#   attention:       (64 x 64 q + 64 x 64 o) / 2 + 64 x (32 k + 32 v) = 8,192
#   dense layer:     8,192 + 24,576 / 2 + 128                      = 20,608  (matmuls 20,480)
#   MoE layer:       8,192 + 49,152 / 2 / 4 + 128 + 512             = 14,976  (matmuls 14,336)
#   LM head:         100 x 64 / tp                                 = 6,400 (tp 1), 3,200 (tp 2)
TINY = Transformer(name="tiny-dense-first", layers=4, hidden=64, heads=4, vocab=100,
                   gated_mlp=True, position="rope", norm="rmsnorm", bias=False, ffn_hidden=32,
                   moe_experts=8, moe_top_k=2, dense_layers=2, dense_ffn=128,
                   tied_embeddings=False)


def test_the_small_model_adds_up():
    # 2 dense + 2 MoE layers, the embedding and head (100 x 64 each), the final norm (64)
    assert param_count(TINY).total == 2 * 41_088 + 2 * 66_176 + 2 * 6_400 + 64


def test_small_dense_first_moe_stages_hold_their_own_layers():
    # two stages of 2 layers: the first holds the 2 dense layers, the last the 2 MoE layers and
    # the head (column 1, the middle, stands for no stage at pp 2: it holds no layer, unit 0)
    layers = np.array([[2.0, 0.0, 2.0], [2.0, 0.0, 2.0]])
    head = np.array([[0.0, 0.0, 1.0], [0.0, 0.0, 1.0]])
    held = stage_layer_params(TINY, np.array([1.0, 2.0]), np.array([1.0, 4.0]), layers, head)
    # the largest unit: a dense layer on the first stage, a MoE layer on the last; the mean
    # layer (53,632) would have been wrong on both
    assert held.largest_unit[0, 0] == 41_088 and held.largest_unit[0, 2] == 66_176
    assert held.largest_unit[1, 0] == 20_608 and held.largest_unit[1, 2] == 14_976
    # matmul weights: 2 dense layers' on the first stage; 2 MoE layers' + the head on the last
    assert held.largest_unit[0, 1] == 0 and held.linear[0, 1] == 0
    assert held.linear[0, 0] == 2 * 40_960 and held.linear[0, 2] == 2 * 65_536 + 6_400
    assert held.linear[1, 0] == 2 * 20_480 and held.linear[1, 2] == 2 * 14_336 + 3_200


def test_a_stage_holding_both_kinds_gathers_the_larger():
    # one stage of 3 layers beside a last stage of 1: the first holds 2 dense + 1 MoE, so its
    # largest unit is the MoE layer (tp 1) and its matmuls 2 x 40,960 + 65,536
    held = stage_layer_params(TINY, np.array([1.0]), np.array([1.0]), np.array([[3.0, 0.0, 1.0]]),
                              np.array([[0.0, 0.0, 1.0]]))
    assert held.largest_unit[0, 0] == 66_176
    assert held.linear[0, 0] == 2 * 40_960 + 65_536


# DeepSeek-V3 (tests/data/hf_configs/deepseek-v3.json), tp 1:
#   MLA attention: q_a 7168 x 1536 (11,010,048) + its norm 1,536 + q_b 1536 x 128 x 192
#     (37,748,736) + kv_a 7168 x (512 + 64) (4,128,768) + its norm 512 + kv_b 512 x 128 x
#     (128 + 128) (16,777,216) + o 128 x 128 x 7168 (117,440,512)             = 187,107,328
#   norms: 2 x 7,168 = 14,336
#   dense layer: 187,107,328 + 3 x 7168 x 18432 (396,361,728) + 14,336        = 583,483,392
#   MoE layer:   187,107,328 + 256 x 3 x 7168 x 2048 (11,274,289,152) + shared 3 x 7168 x 2048
#                (44,040,192) + 14,336 + router 7168 x 256 (1,835,008)        = 11,507,286,016
#   with ep 8 the routed experts are 1/8: 11,507,286,016 - 11,274,289,152 x 7/8 = 1,642,283,008
#   matmuls (the layer less its two norms and the router; MLA's two latent norms, 2,048, stay
#   with the attention as the tool counts them): dense 583,469,056, MoE at ep 8 1,640,433,664
DENSE_V3, MOE_V3_EP8 = 583_483_392, 1_642_283_008
DENSE_V3_MM, MOE_V3_EP8_MM = 583_469_056, 1_640_433_664


def _v3_memory(pp, nodes):
    from willitscale.step.evaluate import evaluate

    sc = build_scenario({"model": V3, "gpu": "h100-sxm", "nodes": nodes, "gpus_per_node": 8,
                         "pp": pp, "ep": 8, "zero": 3, "micro_batch": 1, "seq_len": 4096,
                         "global_batch": 16 * nodes, "recompute": "full"})
    return sc, evaluate(sc, PlanBatch.from_plans([sc.plan]), memory_only=True).memory


def test_deepseek_v3_stage_units_and_matmuls():
    m = load_hf_config(V3)
    assert param_count(m).total == 3 * DENSE_V3 + 58 * 11_507_286_016 + 2 * 129_280 * 7_168 + 7_168
    # 9 stages: 61 + 2 = 63 = 9 x 7, the first stage holds layers 0-5 (3 dense, 3 MoE), a middle
    # stage 7 MoE layers, the last 6 MoE layers and the head (129,280 x 7,168 = 926,679,040)
    held = stage_layer_params(m, np.array([1.0]), np.array([8.0]), np.array([[6.0, 7.0, 6.0]]),
                              np.array([[0.0, 0.0, 1.0]]))
    assert held.largest_unit[0].tolist() == [MOE_V3_EP8] * 3
    assert held.linear[0, 0] == 3 * DENSE_V3_MM + 3 * MOE_V3_EP8_MM
    assert held.linear[0, 1] == 7 * MOE_V3_EP8_MM
    assert held.linear[0, 2] == 6 * MOE_V3_EP8_MM + 926_679_040
    # 21 stages: 63 = 21 x 3, the first stage holds layers 0-1, both dense
    held = stage_layer_params(m, np.array([1.0]), np.array([8.0]), np.array([[2.0, 3.0, 2.0]]),
                              np.array([[0.0, 0.0, 1.0]]))
    assert held.largest_unit[0].tolist() == [DENSE_V3, MOE_V3_EP8, MOE_V3_EP8]
    assert held.linear[0, 0] == 2 * DENSE_V3_MM


def test_deepseek_v3_fsdp_gathers_the_layers_each_stage_holds():
    """ZeRO-3 (FSDP FULL_SHARD) on 21 stages, ep 8, fp32 gradients (the default): each stage
    column's buffers are the two pipeline receive buffers (2 x 4096 x 7168 x 2 bytes) plus
    max(3 x 2, 2 + 2 x 4) = 10 bytes per parameter of its largest unit (memory.buffers). The
    first stage holds two dense layers; before, the mean layer (about 1.59e9 parameters at
    ep 8) was charged there too, about 10 GB too much."""
    sc, mem = _v3_memory(21, 21)
    assert sc.plan.pp == 21 and sc.ddp.grad_bytes == 4
    receive = 2 * 4096 * 7168 * 2
    np.testing.assert_allclose(mem.buffers[0], [receive + 10 * DENSE_V3,
                                                receive + 10 * MOE_V3_EP8,
                                                receive + 10 * MOE_V3_EP8], rtol=1e-12)
    # on 9 stages every column holds a MoE layer: the MoE unit everywhere
    _, mem9 = _v3_memory(9, 9)
    np.testing.assert_allclose(mem9.buffers[0], receive + 10 * MOE_V3_EP8, rtol=1e-12)
    assert mem.buffers[0, 0] == pytest.approx(receive + 10 * DENSE_V3, rel=1e-12)
