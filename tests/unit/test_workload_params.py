"""Parameter counts, derived by hand matrix by matrix."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from willitscale.errors import ConfigError
from willitscale.workload.params import (
    embedding_params_per_tp_rank,
    head_params_per_tp_rank,
    layer_params_per_tp_rank,
    param_count,
)
from willitscale.workload.transformer import Transformer


def gpt2_shape(layers, hidden, heads, name="gpt"):
    return Transformer(name=name, layers=layers, hidden=hidden, heads=heads, vocab=50257, max_positions=1024)


def test_gpt2_small_by_hand():
    # One GPT-2 layer, h = 768: ln_1 2h + c_attn (h*3h + 3h) + c_proj (h*h + h) + ln_2 2h
    # + c_fc (h*4h + 4h) + mlp c_proj (4h*h + h) = 12h^2 + 13h = 7,077,888 + 9,984 = 7,087,872.
    # 12 layers = 85,054,464; + ln_f 2h = 1,536 -> 85,056,000 non-embedding (seeds/003's "~85M").
    # wte 50257*768 = 38,597,376; wpe 1024*768 = 786,432; tied head -> total 124,439,808.
    p = param_count(gpt2_shape(12, 768, 12))
    assert p.per_layer == 7_087_872
    assert p.non_embedding == 85_056_000
    assert p.embedding == 38_597_376 + 786_432
    assert p.total == 124_439_808
    assert p.lm_head == 0 and p.active == p.total


def test_gpt2_large_by_hand():
    # h = 1280: 12h^2 + 13h = 19,660,800 + 16,640 = 19,677,440 per layer; x36 = 708,387,840;
    # + ln_f 2,560 = 708,390,400 (seeds/003's "GPT-2 Large ~708M"). wte 50257*1280 = 64,328,960,
    # wpe 1024*1280 = 1,310,720 -> total 774,030,080.
    p = param_count(gpt2_shape(36, 1280, 20))
    assert p.non_embedding == 708_390_400
    assert p.total == 774_030_080


def test_gqa_gated_untied_rmsnorm_by_hand():
    # h = 64, 8 heads of 8, 2 kv heads -> kv_dim 16; ffn 96 gated; vocab 100; no biases.
    # attention: q 64*64 + k 64*16 + v 64*16 + o 64*64 = 4096 + 1024 + 1024 + 4096 = 10,240
    # MLP: 3 * 64 * 96 = 18,432; norms 2 * 64 = 128 -> layer 28,800; 2 layers 57,600
    # final norm 64; token embedding 6,400; untied head 6,400; RoPE: no position table.
    m = Transformer(name="toy", layers=2, hidden=64, heads=8, kv_heads=2, ffn_hidden=96, gated_mlp=True,
                    vocab=100, position="rope", norm="rmsnorm", bias=False, tied_embeddings=False)
    p = param_count(m)
    assert p.layer_attention == 10_240
    assert p.layer_mlp == 18_432
    assert p.per_layer == 28_800
    assert p.total == 57_600 + 64 + 6_400 + 6_400
    assert p.non_embedding == p.total - 6_400  # the untied head stays in non-embedding
    assert p.layers_total == 57_600


def test_qkv_only_bias_adds_q_plus_two_kv():
    # Qwen2 style: biases on q (64) and k, v (16 each) only: 96 more parameters per layer.
    kw = dict(name="toy", layers=1, hidden=64, heads=8, kv_heads=2, ffn_hidden=96, gated_mlp=True,
              vocab=100, position="rope", norm="rmsnorm", bias=False)
    assert param_count(Transformer(**kw, qkv_bias=True)).per_layer - param_count(Transformer(**kw)).per_layer == 96


def test_mlp_bias_and_attention_bias_overrides():
    # Turning all biases off in a GPT-2 layer removes 3h + h + 4h + h = 9h = 6,912 (h = 768).
    on = param_count(gpt2_shape(1, 768, 12))
    off = param_count(Transformer(name="x", layers=1, hidden=768, heads=12, vocab=50257,
                                  max_positions=1024, bias=False))
    assert on.per_layer - off.per_layer == 9 * 768
    only_mlp = param_count(Transformer(name="x", layers=1, hidden=768, heads=12, vocab=50257,
                                       max_positions=1024, bias=False, mlp_bias=True))
    assert only_mlp.per_layer - off.per_layer == 4 * 768 + 768


def test_embedding_norm_counts_a_layernorm():
    # BLOOM's norm after the embedding: weight + bias = 2h, not an embedding parameter.
    base = dict(name="b", layers=1, hidden=32, heads=4, vocab=10, position="alibi")
    delta = param_count(Transformer(**base, embedding_norm=True)).total - param_count(Transformer(**base)).total
    assert delta == 64
    assert param_count(Transformer(**base, embedding_norm=True)).embedding_norm == 64


def test_moe_total_and_active_by_hand():
    # 4 experts, top-1, h = 16, ffn 32 ungated with biases: one expert = 2*16*32 + 32 + 16 = 1,072.
    # Router 16*4 = 64 (no bias). Attention 4h^2 + 4h = 1,088; norms 2*2h = 64.
    # per layer: 1,088 + 4*1,072 + 64 + 64 = 5,504; active per layer 1,088 + 1,072 + 64 + 64 = 2,288.
    m = Transformer(name="moe", layers=1, hidden=16, heads=2, ffn_hidden=32, vocab=10, max_positions=8,
                    moe_experts=4, moe_top_k=1)
    p = param_count(m)
    assert p.layer_router == 64
    assert p.per_layer == 5_504
    assert p.per_layer_active == 2_288
    assert p.total - p.active == 3 * 1_072


def test_tp_shard_by_hand_gpt2_layer():
    # GPT-2 layer, h = 768, tp = 2: split q,k,v (3h^2 + 3h), o weight h^2, MLP weights 8h^2 and
    # c_fc bias 4h; replicate o bias h, c_proj bias h and the norms 4h.
    h = 768
    expected = (3 * h * h + 3 * h + h * h + 8 * h * h + 4 * h) / 2 + (h + h + 4 * h)
    assert layer_params_per_tp_rank(gpt2_shape(1, h, 12), 2) == expected
    assert layer_params_per_tp_rank(gpt2_shape(1, h, 12), 1) == param_count(gpt2_shape(1, h, 12)).per_layer


def test_tp_shard_replicates_kv_when_fewer_kv_heads_than_ranks():
    # 2 kv heads over tp = 8: each rank keeps one whole kv head (head_dim 8) for k and for v.
    m = Transformer(name="toy", layers=1, hidden=64, heads=8, kv_heads=2, ffn_hidden=96, gated_mlp=True,
                    vocab=100, position="rope", norm="rmsnorm", bias=False)
    # q 64*64/8 = 512, k and v 2 * 64*8 = 1024, o 512, MLP 18,432/8 = 2,304, norms 128
    assert layer_params_per_tp_rank(m, 8) == 512 + 1024 + 512 + 2304 + 128


def test_tp_shards_vectorize_over_tp():
    m = gpt2_shape(12, 768, 12)
    tps = np.array([1, 2, 4])
    for fn in (layer_params_per_tp_rank, embedding_params_per_tp_rank, head_params_per_tp_rank):
        np.testing.assert_allclose(fn(m, tps), [fn(m, int(t)) for t in tps])
    # tied head: nothing but the final norm (2h) on every rank
    assert head_params_per_tp_rank(m, 4) == 2 * 768


@settings(max_examples=60, deadline=None)
@given(layers=st.integers(1, 8), heads=st.sampled_from([1, 2, 4, 8]), head_dim=st.integers(1, 16),
       group=st.sampled_from([1, 2, 4]), ffn=st.integers(1, 64), vocab=st.integers(1, 500),
       gated=st.booleans(), bias=st.booleans(), tied=st.booleans(), tp=st.sampled_from([1, 2, 4]))
def test_shards_times_tp_cover_the_layer(layers, heads, head_dim, group, ffn, vocab, gated, bias, tied, tp):
    kv = max(1, heads // group)
    m = Transformer(name="p", layers=layers, hidden=heads * head_dim, heads=heads, kv_heads=kv, ffn_hidden=ffn,
                    gated_mlp=gated, vocab=vocab, bias=bias, tied_embeddings=tied, position="rope")
    p = param_count(m)
    # Every parameter is on at least one rank, and nothing is held more than tp times.
    assert p.per_layer - 1e-6 <= tp * layer_params_per_tp_rank(m, tp) <= tp * p.per_layer + 1e-6
    assert p.total == p.embedding + p.embedding_norm + p.layers_total + p.final_norm + p.lm_head


def test_shape_validation_names_the_field():
    with pytest.raises(ConfigError, match="kv_heads"):
        Transformer(name="x", layers=1, hidden=64, heads=8, kv_heads=3, vocab=10)
    with pytest.raises(ConfigError, match="heads"):
        Transformer(name="x", layers=1, hidden=65, heads=8, vocab=10)
    with pytest.raises(ConfigError, match="moe_top_k"):
        Transformer(name="x", layers=1, hidden=64, heads=8, vocab=10, moe_experts=4, moe_top_k=5)
    with pytest.raises(ConfigError, match="seq_len"):
        Transformer(name="x", layers=1, hidden=64, heads=8, vocab=10, max_positions=8, seq_len=16)
    with pytest.raises(ConfigError, match="layers"):
        Transformer(name="x", layers=0, hidden=64, heads=8, vocab=10)


def test_tp_divides_shape():
    # Llama 2 70B: 64 heads, ffn 28672 = 2^12 * 7, 8 kv heads. tp 16 splits heads and ffn and
    # is a multiple of 8 (kv replicated); tp 3 divides neither 64 nor 8; tp 128 exceeds heads.
    from willitscale.workload.catalog import get_model
    from willitscale.workload.params import tp_divides_shape

    m = get_model("llama2-70b")
    assert tp_divides_shape(m, 16) and tp_divides_shape(m, 8) and tp_divides_shape(m, 1)
    assert not tp_divides_shape(m, 3) and not tp_divides_shape(m, 128)
    np.testing.assert_array_equal(tp_divides_shape(m, np.array([1, 3, 16, 128])), [True, False, True, False])
