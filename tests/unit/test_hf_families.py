"""The current Hugging Face families: shapes read from config.json and parameter totals against
what each model's publisher states, with the count derived by hand from the config's numbers
beside each assertion (h hidden, L layers, H heads, f widths, V vocabulary)."""

import json
from pathlib import Path

import pytest

from willitscale.errors import ConfigError
from willitscale.workload.hf import HF_MODEL_TYPES, load_hf_config, transformer_from_hf
from willitscale.workload.params import param_count

HF = Path(__file__).parent.parent / "data" / "hf_configs"


def load(name):
    return load_hf_config(HF / f"{name}.json")


def cut_to(published, digit):
    """The counts a figure published cut (not rounded) to ``digit`` stand for: DeepSeek's and
    Qwen's activated counts are truncated (DeepSeek-V3's 37.55B is "37B", Qwen3-30B-A3B's 3.35B
    "3.3B"; rounding would give 38B and 3.4B)."""
    return lambda count: published <= count < published + digit


# -- DeepSeek (multi-head latent attention, shared experts, dense-first layers) --------------

def test_deepseek_v3_is_671b_total_37b_activated():
    """DeepSeek-V3 technical report (arXiv:2412.19437), abstract: "671B total parameters with
    37B activated for each token" (the 14B multi-token-prediction module is apart).

    h = 7168, H = 128, d_nope = 128, d_rope = 64, d_v = 128, q_lora = 1536, kv_lora = 512:
      q_a 7168*1536 = 11,010,048; its norm 1,536; q_b 1536*128*192 = 37,748,736;
      kv_a 7168*(512+64) = 4,128,768; its norm 512; kv_b 512*128*(128+128) = 16,777,216;
      o 128*128*7168 = 117,440,512                       -> attention 187,107,328
    dense MLP (layers 0-2) 3*7168*18432 = 396,361,728; one expert 3*7168*2048 = 44,040,192;
    MoE layer: 256 routed + 1 shared experts = 11,318,329,344, router 256*7168 = 1,835,008;
    two norms 14,336.
      dense layer 583,483,392 x 3 + MoE layer 11,507,286,016 x 58 = 669,173,039,104
      + embedding and LM head 2 x 129280*7168 = 1,853,358,080 + final norm 7,168
      = 671,026,404,352.
    Activated: a MoE layer's 8 routed + 1 shared experts = 396,361,728, so the MoE layer
    activates 585,318,400; x 58 + 1,750,450,176 + 1,853,365,248 = 37,552,282,624.
    """
    p = param_count(load("deepseek-v3"))
    assert p.layer_attention == 187_107_328
    assert p.total == 671_026_404_352
    assert p.active == 37_552_282_624
    assert p.total == pytest.approx(671e9, abs=0.5e9)
    assert cut_to(37e9, 1e9)(p.active)


def test_deepseek_v3_shape():
    m = load("deepseek-v3")
    assert (m.head_dim, m.v_head_dim, m.rope_head_dim) == (192, 128, 64)
    assert (m.q_lora_rank, m.kv_lora_rank) == (1536, 512)
    assert (m.dense_layers, m.moe_layers, m.dense_ffn, m.ffn_hidden) == (3, 58, 18432, 2048)
    assert (m.moe_experts, m.moe_top_k, m.moe_shared_ffn) == (256, 8, 2048)
    assert m.seq_len == 4096  # rope_scaling's original_max_position_embeddings (pretraining)


def test_deepseek_v2_is_236b_total_21b_activated():
    """DeepSeek-V2 (arXiv:2405.04434), abstract: "236B total parameters, of which 21B are
    activated for each token".

    h = 5120, H = 128, q_lora 1536, kv_lora 512: attention 5120*1536 + 1536 + 1536*128*192
    + 5120*576 + 512 + 512*128*256 + 128*128*5120 = 149,227,520. Dense layer 0: MLP
    3*5120*12288 = 188,743,680 -> 337,981,440. MoE layers 1-59: 160 routed + 2 shared experts of
    3*5120*1536 = 23,592,960 -> 3,822,059,520, router 819,200, norms 10,240 -> 3,972,116,480.
    Total 337,981,440 + 59 x 3,972,116,480 + 2 x 102400*5120 + 5,120 = 235,741,434,880.
    Activated: 6 routed + 2 shared = 188,743,680 -> MoE layer 338,800,640;
    337,981,440 + 59 x 338,800,640 + 1,048,581,120 = 21,375,800,320.
    """
    p = param_count(load("deepseek-v2"))
    assert p.total == 235_741_434_880
    assert p.active == 21_375_800_320
    assert p.total == pytest.approx(236e9, abs=0.5e9)
    assert cut_to(21e9, 1e9)(p.active)


def test_deepseek_v2_lite_is_15_7b_total():
    """DeepSeek-V2-Lite (model card; arXiv:2405.04434 appendix B): 15.7B total, 2.4B activated.
    No q_lora_rank: one q projection 2048*16*192 = 6,291,456; kv_a 2048*576 = 1,179,648, norm
    512, kv_b 512*16*256 = 2,097,152, o 16*128*2048 = 4,194,304 -> attention 13,763,072.
    Dense layer 0: 3*2048*10944 = 67,239,936 -> 81,007,104. MoE layers 1-26: 66 experts of
    3*2048*1408 = 8,650,752 = 570,949,632, router 131,072, norms 4,096 -> 584,847,872.
    Total 81,007,104 + 26 x 584,847,872 + 2 x 102400*2048 + 2,048 = 15,706,484,224.
    Activated: 8 experts = 69,206,016 -> 83,104,256 per MoE layer; 81,007,104 + 26 x 83,104,256
    + 419,432,448 = 2,661,150,208, or 2,451,435,008 without the token embedding (a lookup, not a
    matmul). The published 2.4B is that figure cut to one decimal (the count with the embedding
    is not in [2.4B, 2.5B)); V2 and V3 count the embedding, so this reading is an inference.
    """
    m = load("deepseek-v2-lite")
    assert m.q_lora_rank is None and m.kv_lora_rank == 512
    p = param_count(m)
    assert p.layer_attention == 13_763_072
    assert p.total == 15_706_484_224
    assert p.total == pytest.approx(15.7e9, abs=0.05e9)
    assert p.active == 2_661_150_208
    assert cut_to(2.4e9, 0.1e9)(p.active - p.token_embedding)
    assert not cut_to(2.4e9, 0.1e9)(p.active)


# -- Qwen ---------------------------------------------------------------------------------------

def test_qwen3_30b_a3b_is_30_5b_total_3_3b_activated():
    """Qwen3-30B-A3B model card: 30.5B total, 3.3B activated, 29.9B non-embedding.
    h = 2048, H = 32 x 128 (q 4096), 4 KV heads (512): attention 2048*(4096+2*512) + 4096*2048
    = 18,874,368, QK-norm 2 x 128 = 256; 128 experts of 3*2048*768 = 4,718,592 = 603,979,776;
    router 128*2048 = 262,144; norms 4,096 -> layer 623,120,640; x 48 = 29,909,790,720 (the card's
    non-embedding: layers only) + 2 x 151936*2048 + 2,048 = 30,532,122,624.
    Activated: 8 experts 37,748,736 -> layer 56,889,600; x 48 + 622,331,904 = 3,353,032,704.
    """
    p = param_count(load("qwen3-30b-a3b"))
    assert p.layers_total == 29_909_790_720
    assert p.total == 30_532_122_624
    assert p.active == 3_353_032_704
    assert p.total == pytest.approx(30.5e9, abs=0.05e9)
    assert cut_to(3.3e9, 0.1e9)(p.active)
    assert p.layers_total == pytest.approx(29.9e9, abs=0.05e9)


def test_qwen3_dense_head_dim_and_qk_norm():
    """Qwen3-8B model card: 8.2B, 6.95B non-embedding. Qwen3-0.6B: 0.6B, 0.44B non-embedding,
    with a query width 16 x 128 = 2,048 on a 1,024 hidden.
    8B: attention 4096*(4096+2*1024) + 4096*4096 = 41,943,040 + QK-norm 256, MLP 3*4096*12288 =
    150,994,944, norms 8,192 -> 192,946,432 x 36 = 6,946,071,552 (+ final norm 4,096) and
    2 x 151936*4096 = 1,244,659,712 -> 8,190,735,360.
    0.6B: attention 1024*(2048+2*1024) + 2048*1024 = 6,291,456 + 256, MLP 9,437,184, norms
    2,048 -> 15,730,944 x 28 = 440,466,432; tied embedding 151936*1024 -> 596,049,920.
    """
    p8 = param_count(load("qwen3-8b"))
    assert p8.layers_total == 6_946_071_552
    assert p8.total == 8_190_735_360
    assert p8.total == pytest.approx(8.2e9, abs=0.05e9)
    assert p8.layers_total == pytest.approx(6.95e9, abs=0.005e9)
    m = load("qwen3-0.6b")
    assert (m.q_dim, m.hidden, m.qk_norm, m.tied_embeddings) == (2048, 1024, "head", True)
    p = param_count(m)
    assert p.layers_total == 440_466_432
    assert p.total == 596_049_920
    assert p.layers_total == pytest.approx(0.44e9, abs=0.005e9)


def test_qwen2_57b_a14b_shared_expert_and_gate():
    """Qwen2 technical report (arXiv:2407.10671) table 1 and the model card: 57B total, 14B
    activated. h = 3584, 28 heads, 4 KV heads of 128: attention 3584*4608 + 3584*3584 + q/k/v
    biases 4,608 = 29,364,736; 64 experts of 3*3584*2560 = 27,525,120 -> 1,761,607,680; shared
    expert 3*3584*20480 = 220,200,960 and its gate 3,584; router 229,376; norms 7,168 ->
    2,011,413,504 x 28 = 56,319,578,112 + 2 x 151936*3584 + 3,584 = 57,408,658,944.
    Activated: 8 experts 220,200,960 + shared 220,200,960 -> 470,006,784 x 28 + 1,089,080,832
    = 14,249,270,784.
    """
    m = load("qwen2-57b-a14b")
    assert (m.moe_shared_ffn, m.moe_shared_gate, m.qkv_bias, m.dense_layers) == (20480, True, True, 0)
    p = param_count(m)
    assert p.total == 57_408_658_944
    assert p.active == 14_249_270_784
    assert cut_to(57e9, 1e9)(p.total)
    assert cut_to(14e9, 1e9)(p.active)


def test_qwen_moe_dense_layers_from_mlp_only_layers_and_sparse_step():
    """Qwen2MoeDecoderLayer: layer i is sparse when not in mlp_only_layers and (i + 1) %
    decoder_sparse_step == 0. mlp_only_layers [0, 1, 2] of 48 layers: 3 dense layers first, 45
    sparse, as DeepSeek's first_k_dense_replace places them. Step 2 (every other layer dense)
    interleaves dense and MoE layers, which the per-stage model cannot place: refused, naming
    the keys, not counted as if the dense layers came first."""
    config = json.loads((HF / "qwen3-30b-a3b.json").read_text())
    m = transformer_from_hf(config | {"mlp_only_layers": [0, 1, 2]}, "x")
    assert (m.moe_layers, m.dense_layers, m.dense_ffn) == (45, 3, 6144)
    dense = param_count(transformer_from_hf(config, "y"))
    # each dense layer trades 128 experts + router for one MLP of 3*2048*6144 = 37,748,736
    assert dense.total - param_count(m).total == 3 * (603_979_776 + 262_144 - 37_748_736)
    with pytest.raises(ConfigError, match=r"decoder_sparse_step / mlp_only_layers = 'dense layers "
                                          r"\[0, 2, 4, .*only before the MoE layers"):
        transformer_from_hf(config | {"decoder_sparse_step": 2}, "z")
    v3 = json.loads((HF / "deepseek-v3.json").read_text())
    with pytest.raises(ConfigError, match=r"first_k_dense_replace / moe_layer_freq"):
        transformer_from_hf(v3 | {"moe_layer_freq": 2}, "v")


# -- Gemma, Phi-3, OLMo 2 -----------------------------------------------------------------------

def test_gemma2_non_embedding_counts_equal_the_paper():
    """Gemma 2 report (arXiv:2408.00118) table 2, non-embedding parameters: 9B 8,324,201,984,
    27B 26,047,480,320. 9B: h 3584, 16 heads x 256 (q 4096), 8 KV heads (2048): attention
    3584*8192 + 4096*3584 = 44,040,192; GeGLU 3*3584*14336 = 154,140,672; four norms 14,336 ->
    198,195,200 x 42 + final norm 3,584. 27B: h 4608, q 4096, kv 2048: attention 56,623,104,
    MLP 3*4608*36864 = 509,607,936, norms 18,432 -> 566,249,472 x 46 + 4,608.
    (The table's embedding rows count 256,128 rows, the config's vocabulary 256,000.)"""
    p9, p27 = param_count(load("gemma-2-9b")), param_count(load("gemma-2-27b"))
    assert p9.non_embedding == 8_324_201_984
    assert p27.non_embedding == 26_047_480_320
    assert p9.lm_head == 0 and p9.token_embedding == 256_000 * 3584


def test_gemma_window_patterns():
    """Gemma 2: local attention on even layers (21 of 42); Gemma 3: five local per global layer
    ((i + 1) % 6 != 0: 62 - 10 = 52 of 62; 26 - 4 = 22 of 26)."""
    g2, g3, g3s = load("gemma-2-9b"), load("gemma-3-27b"), load("gemma-3-1b")
    assert (g2.sliding_window, g2.window_layer_count, g2.layer_norms) == (4096, 21, 4)
    assert (g3.sliding_window, g3.window_layer_count, g3.qk_norm) == (1024, 52, "head")
    assert (g3s.sliding_window, g3s.window_layer_count) == (512, 22)
    config = json.loads((HF / "gemma-3-1b.json").read_text())
    kinds = ["sliding_attention"] * 20 + ["full_attention"] * 6
    assert transformer_from_hf(config | {"layer_types": kinds}, "x").window_layer_count == 20
    with pytest.raises(ConfigError, match="layer_types"):
        transformer_from_hf(config | {"layer_types": kinds[:3]}, "x")


def test_gemma3_counts_equal_the_report():
    """Gemma 3 report (arXiv:2503.19786) table 1: 1B 302M embedding, 698M non-embedding; 27B
    25,600M non-embedding (its 417M vision encoder is not counted). 1B: h 1152, q 4 x 256 = 1024,
    kv 256: attention 1152*1536 + 1024*1152 = 2,949,120 + QK-norm 512, MLP 3*1152*6912 =
    23,887,872, norms 4,608 -> 26,842,112 x 26 = 697,894,912. 27B: h 5376, q 4096, kv 2048:
    attention 66,060,288 + 256, MLP 3*5376*21504 = 346,816,512, norms 21,504 -> 412,898,560 x 62
    = 25,599,710,720."""
    p1, p27 = param_count(load("gemma-3-1b")), param_count(load("gemma-3-27b"))
    assert p1.layers_total == 697_894_912
    assert p1.token_embedding == pytest.approx(302e6, abs=0.5e6)
    assert p27.layers_total == 25_599_710_720
    assert p27.layers_total == pytest.approx(25_600e6, abs=1e6)


def test_phi3_mini_is_3_8b():
    """Phi-3 report (arXiv:2404.14219): phi-3-mini, 3.8B parameters. h 3072, 32 layers, MHA:
    4*3072^2 = 37,748,736, MLP 3*3072*8192 = 75,497,472, norms 6,144 -> 113,252,352 x 32 =
    3,624,075,264 + 2 x 32064*3072 = 197,001,216 + 3,072 = 3,821,079,552."""
    m = load("phi-3-mini-4k")
    assert m.sliding_window == 2047 and m.gated_mlp
    assert param_count(m).total == 3_821_079_552
    assert param_count(m).total == pytest.approx(3.8e9, abs=0.05e9)


def test_olmo2_7b_qk_norm_over_all_heads():
    """OLMo-2-1124-7B: q_norm over 32*128 = 4,096 and k_norm over 4,096 per layer. Layer: 4*4096^2
    = 67,108,864 + 8,192 + MLP 3*4096*11008 = 135,266,304 + norms 8,192 = 202,391,552 x 32 =
    6,476,529,664 + 2 x 100352*4096 = 822,083,584 + 4,096 = 7,298,617,344 (the model page's
    weights: 7.3B parameters)."""
    m = load("olmo-2-7b")
    assert m.qk_norm == "full"
    assert param_count(m).total == 7_298_617_344
    assert param_count(m).total == pytest.approx(7.3e9, abs=0.05e9)


# -- errors ---------------------------------------------------------------------------------------

def test_unsupported_model_type_names_it_and_the_supported_list():
    with pytest.raises(ConfigError) as err:
        transformer_from_hf({"model_type": "mamba"}, "x", where="cfg.json")
    text = str(err.value)
    assert "mamba" in text and "cfg.json" in text
    for family in ("deepseek_v3", "qwen3_moe", "gemma3", "phi3", "olmo2", "mixtral"):
        assert family in HF_MODEL_TYPES and family in text


def test_missing_mla_key_is_named():
    config = json.loads((HF / "deepseek-v3.json").read_text())
    del config["kv_lora_rank"]
    with pytest.raises(ConfigError, match="kv_lora_rank"):
        transformer_from_hf(config, "x")
    with pytest.raises(ConfigError, match="q_lora_rank"):
        transformer_from_hf(json.loads((HF / "deepseek-v3.json").read_text()) | {"q_lora_rank": "big"}, "x")


def test_a_hub_id_in_the_local_cache_loads_a_new_family(monkeypatch, tmp_path):
    """deepseek-ai/DeepSeek-V3 in huggingface_hub's cache layout (no network) is the same model
    as its config file."""
    import shutil

    from willitscale.workload.catalog import get_model

    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    snapshot = tmp_path / "models--deepseek-ai--DeepSeek-V3" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    shutil.copy(HF / "deepseek-v3.json", snapshot / "config.json")
    (snapshot.parent.parent / "refs").mkdir()
    (snapshot.parent.parent / "refs" / "main").write_text("abc123")
    assert param_count(get_model("deepseek-ai/DeepSeek-V3")) == param_count(load("deepseek-v3"))


# -- the shape's own checks ---------------------------------------------------------------------

BASE = dict(name="m", layers=4, hidden=64, heads=4, vocab=100, gated_mlp=True, position="rope",
            norm="rmsnorm", bias=False)


@pytest.mark.parametrize(("fields", "named"), [
    ({"moe_shared_ffn": 32}, "moe_shared_ffn"),  # shared experts without experts
    ({"dense_layers": 1}, "dense_layers"),
    ({"moe_experts": 4, "moe_top_k": 2, "dense_layers": 5}, "dense_layers"),  # > layers
    ({"moe_experts": 4, "moe_top_k": 2, "moe_shared_gate": True}, "moe_shared_gate"),
    ({"window_layers": 2}, "window_layers"),  # without a sliding window
    ({"sliding_window": 8, "window_layers": 5}, "window_layers"),
    ({"qk_norm": "per-head"}, "qk_norm"),
    ({"q_lora_rank": 8}, "q_lora_rank"),  # without kv_lora_rank
    ({"kv_lora_rank": 8, "head_dim": 24, "rope_head_dim": 0}, "rope_head_dim"),
    ({"kv_lora_rank": 8, "head_dim": 24, "rope_head_dim": 24}, "rope_head_dim"),
    ({"kv_lora_rank": 8, "head_dim": 24, "rope_head_dim": 8, "kv_heads": 2}, "kv_heads"),
    ({"layer_norms": 0}, "layer_norms"),
    ({"v_head_dim": 0}, "v_head_dim"),
])
def test_inconsistent_extension_fields_are_refused(fields, named):
    from willitscale.workload.transformer import Transformer

    with pytest.raises(ConfigError, match=named):
        Transformer(**BASE | fields)


def test_a_small_mla_model_counted_by_hand():
    """h 64, 4 heads, d_qk 24 = 16 nope + 8 rope, d_v 16, q_lora 32, kv_lora 8, RMSNorm, tied:
    q_a 64*32 + 32 + q_b 32*4*24 = 2,048 + 32 + 3,072; kv_a 64*(8+8) + 8 + kv_b 8*4*(16+16)
    = 1,024 + 8 + 1,024; o 4*16*64 = 4,096 -> attention 11,304; MLP 3*64*256 = 49,152; norms
    128 -> layer 60,584 x 4 = 242,336; + 100*64 + 64 = 248,800."""
    from willitscale.workload.transformer import Transformer

    m = Transformer(**BASE | dict(kv_lora_rank=8, q_lora_rank=32, head_dim=24, rope_head_dim=8,
                                  v_head_dim=16))
    p = param_count(m)
    assert p.layer_attention == 11_304
    assert p.total == 248_800


def test_torchtitan_deepseek_v3_671b_flavor_is_the_catalog_model():
    """pytorch/torchtitan names DeepSeek-V3 ("deepseek_v3", "671B") (its deepseekv3_configs)."""
    from willitscale.scenario.torchtitan import torchtitan_settings

    job = {"model": {"name": "deepseek_v3", "flavor": "671B"},
           "parallelism": {"expert_parallel_degree": 8}, "training": {"local_batch_size": 1}}
    assert torchtitan_settings(job, "job.toml")["model"] == "deepseek-v3"


def test_gemma3_without_a_text_table_is_named():
    config = json.loads((HF / "gemma-3-27b.json").read_text())
    with pytest.raises(ConfigError, match="text_config"):
        transformer_from_hf(config | {"text_config": 5}, "x")
    del config["text_config"]
    with pytest.raises(ConfigError, match="text_config"):
        transformer_from_hf(config, "x")


def test_phi3_long_context_keeps_its_pretraining_length():
    """Phi-3-mini-128k: max_position_embeddings 131072, original_max_position_embeddings 4096 at
    the top level (LongRoPE), sliding_window 262144 (above any sequence: no window)."""
    config = json.loads((HF / "phi-3-mini-4k.json").read_text()) | {
        "max_position_embeddings": 131072, "sliding_window": 262144,
        "rope_scaling": {"type": "longrope", "long_factor": [1.0], "short_factor": [1.0]}}
    m = transformer_from_hf(config, "x")
    assert (m.max_positions, m.seq_len) == (131072, 4096)
    assert param_count(m).total == 3_821_079_552
