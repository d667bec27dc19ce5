"""Training FLOPs per token: every matmul counted by hand."""

import numpy as np
import pytest

from willitscale.errors import ConfigError
from willitscale.workload.catalog import get_model
from willitscale.workload.flops import (
    keys_per_query,
    layer_forward_flops,
    training_flops,
)
from willitscale.workload.transformer import Transformer


def test_gpt2_forward_per_token_by_hand():
    # GPT-2 small, s = 1024, h = 768. Per layer, forward, 2 FLOPs per multiply-add:
    # qkv 2*h*3h = 3,538,944; QK^T 2*s*h = 1,572,864; AV 1,572,864; out 2*h^2 = 1,179,648;
    # MLP 2*2*h*4h = 9,437,184 -> 17,301,504 per layer; x12 = 207,618,048.
    # LM head 2*h*V = 2*768*50257 = 77,194,752 -> forward 284,812,800 FLOPs per token.
    f = training_flops(get_model("gpt2"), 1024, flash_attention=False)
    assert f.layer_forward.qkv == 3_538_944
    assert f.layer_forward.scores == f.layer_forward.values == 1_572_864
    assert f.layer_forward.mlp == 9_437_184
    assert f.layer_forward_per_token == 17_301_504
    assert f.lm_head_forward_per_token == 77_194_752
    assert f.forward_per_token == 284_812_800
    # backward = 2 x forward: model FLOPs are 3x (seeds/000: "1x forward and 2x backward")
    assert f.model_per_token == 3 * 284_812_800
    assert f.hardware_per_token == f.model_per_token  # no recompute, standard attention


def test_full_recompute_is_one_more_forward_of_the_layers():
    # seeds/000's "4 instead of 3": layers run forward twice; the LM head is not recomputed.
    # GPT-2: 4 * 207,618,048 + 3 * 77,194,752 = 830,472,192 + 231,584,256 = 1,062,056,448.
    f = training_flops(get_model("gpt2"), 1024, recompute="full", flash_attention=False)
    assert f.hardware_per_token == 1_062_056_448
    assert f.model_per_token == 3 * 284_812_800  # model FLOPs do not change


def test_selective_recompute_reruns_qk_and_av_only():
    # GPT-2: per layer QK^T + AV = 2 * 1,572,864 = 3,145,728; x12 = 37,748,736 extra.
    f = training_flops(get_model("gpt2"), 1024, recompute="selective", flash_attention=False)
    assert f.hardware_per_token - f.model_per_token == 37_748_736
    assert f.layer_recompute_per_token == 3_145_728


def test_flash_attention_backward_recomputes_qk():
    # FlashAttention's backward reruns Q K^T: 1,572,864 per layer, 18,874,368 for 12 layers.
    f = training_flops(get_model("gpt2"), 1024, flash_attention=True)
    assert f.hardware_per_token - f.model_per_token == 12 * 1_572_864


def test_gqa_shrinks_kv_projections_but_not_scores():
    # Llama 2 70B: h 8192, 64 heads x 128, 8 kv heads -> kv_dim 1024.
    # qkv 2*8192*(8192 + 2*1024) = 167,772,160; scores at s = 4096: 2*4096*8192 = 67,108,864.
    # MLP gated 2*3*8192*28672 = 1,409,286,144.
    layer = layer_forward_flops(get_model("llama2-70b"), 4096)
    assert layer.qkv == 167_772_160
    assert layer.scores == 67_108_864
    assert layer.mlp == 1_409_286_144


def test_moe_counts_top_k_experts_and_router():
    # Mixtral: MLP 2 experts x 2*3*4096*14336 = 704,643,072; router 2*4096*8 = 65,536.
    layer = layer_forward_flops(get_model("mixtral-8x7b"), 4096)
    assert layer.mlp == 704_643_072
    assert layer.router == 65_536


def test_causal_counts_half_plus_diagonal():
    # query i (1-based) sees i keys: mean over s = 4 is (1+2+3+4)/4 = 2.5 = (s+1)/2.
    assert keys_per_query(4, causal=True) == 2.5
    assert keys_per_query(4) == 4
    # window 2 over s = 4: keys 1, 2, 2, 2 -> mean 7/4
    assert keys_per_query(4, 2, causal=True) == 1.75
    assert keys_per_query(4, 2) == 2
    np.testing.assert_allclose(keys_per_query(np.array([4, 8]), causal=True), [2.5, 4.5])


def test_document_masking_counts_keys_within_documents():
    # s = 10 packed with documents of 4: documents of 4, 4, 2 tokens; causal key sums
    # 1+2+3+4 = 10, 10, 1+2 = 3 -> 23 keys over 10 queries = 2.3
    assert keys_per_query(10, causal=True, document_length=4) == pytest.approx(2.3)
    # documents as long as the sequence (or longer) are one document: (s + 1) / 2
    assert keys_per_query(8, causal=True, document_length=8) == 4.5
    assert keys_per_query(8, causal=True, document_length=100) == 4.5
    # a window inside documents: d = 4, w = 2 -> keys 1, 2, 2, 2 per document -> 7/4
    assert keys_per_query(8, 2, causal=True, document_length=4) == 1.75
    # full counting (the model-FLOP convention, unfused kernels) ignores documents
    assert keys_per_query(8, document_length=2) == 8
    with pytest.raises(ConfigError, match="document_length"):
        keys_per_query(8, causal=True, document_length=0)


def test_document_masking_shrinks_only_the_causal_attention_flops():
    # llama3-8b, s = 8192, documents of 1024: scores per token 2 q keys, keys (1024 + 1) / 2
    m = get_model("llama3-8b")
    docs = layer_forward_flops(m, 8192, causal=True, document_length=1024)
    assert docs.scores == pytest.approx(2 * m.q_dim * 1025 / 2)
    assert layer_forward_flops(m, 8192, document_length=1024).scores == 2 * m.q_dim * 8192


def test_sliding_window_caps_attention_flops():
    # Mistral 7B (window 4096): at s = 8192 each query sees 4096 keys -> scores 2*4096*4096.
    assert layer_forward_flops(get_model("mistral-7b"), 8192).scores == 2 * 4096 * 4096


def test_vectorized_over_seq_len_matches_scalar_calls():
    m = get_model("llama3-8b")
    seqs = np.array([512, 2048, 8192])
    for mode in ("none", "selective", "full"):
        vec = training_flops(m, seqs, recompute=mode)
        for i, s in enumerate(seqs):
            one = training_flops(m, int(s), recompute=mode)
            assert vec.hardware_per_token[i] == pytest.approx(one.hardware_per_token)
            assert vec.layer_backward_per_token[i] == pytest.approx(one.layer_backward_per_token)
            assert vec.hardware_per_sequence[i] == pytest.approx(one.hardware_per_token * s)


def test_layer_parts_add_up():
    f = training_flops(get_model("llama2-7b"), 4096, recompute="selective")
    total = f.layers * f.layer_hardware_per_token + f.lm_head_per_token
    assert f.hardware_per_token == pytest.approx(total)
    assert f.layer_hardware_per_token == pytest.approx(f.layer_forward_per_token + f.layer_backward_per_token)


def test_unknown_recompute_is_a_config_error():
    with pytest.raises(ConfigError, match="recompute"):
        training_flops(get_model("gpt2"), recompute="some")
    with pytest.raises(ConfigError, match="seq_len"):
        keys_per_query(0)


def test_recompute_modes_order():
    m = Transformer(name="t", layers=2, hidden=64, heads=4, vocab=100)
    none, sel, full = (training_flops(m, 64, recompute=r).hardware_per_token for r in ("none", "selective", "full"))
    assert none < sel < full


def test_recompute_as_an_array():
    m = get_model("llama2-7b")
    modes = np.array(["none", "selective", "full"])
    vec = training_flops(m, 4096, recompute=modes)
    for i, mode in enumerate(modes):
        assert vec.hardware_per_token[i] == pytest.approx(training_flops(m, 4096, recompute=str(mode)).hardware_per_token)
