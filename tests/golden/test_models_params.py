"""Catalog parameter counts against published figures, each with its source.

Exact integers are the parameter counts of the released checkpoints (the total the Hugging
Face hub reports from the safetensors metadata, or the model card); papers' rounded figures
are checked to their rounding.
"""

import pytest

from willitscale.workload.catalog import get_model
from willitscale.workload.params import param_count

EXACT = [
    # GPT-2 checkpoints (huggingface.co/openai-community/gpt2*, model pages "124M/355M/774M/1.56B
    # params"); the GPT-2 paper's Table 2 miscounted them as 117M/345M/762M/1542M.
    ("gpt2", 124_439_808),
    ("gpt2-medium", 354_823_168),
    ("gpt2-large", 774_030_080),
    ("gpt2-xl", 1_557_611_200),
    # BLOOM model card (huggingface.co/bigscience/bloom): "176,247,271,424 parameters".
    ("bloom-176b", 176_247_271_424),
    # Llama 2 checkpoints (huggingface.co/meta-llama/Llama-2-{7b,13b,70b}-hf, safetensors totals).
    ("llama2-7b", 6_738_415_616),
    ("llama2-13b", 13_015_864_320),
    ("llama2-70b", 68_976_648_192),
    # Llama 3 (huggingface.co/meta-llama/Meta-Llama-3-{8B,70B}, safetensors totals).
    ("llama3-8b", 8_030_261_248),
    ("llama3-70b", 70_553_706_496),
    # Mistral 7B v0.1 and Mixtral 8x7B v0.1 (huggingface.co/mistralai, safetensors totals; the
    # Mixtral announcement: "46.7B total parameters").
    ("mistral-7b", 7_241_732_096),
    ("mixtral-8x7b", 46_702_792_704),
    # Qwen2-7B (huggingface.co/Qwen/Qwen2-7B, safetensors total 7.62B).
    ("qwen2-7b", 7_615_616_512),
]


@pytest.mark.parametrize(("name", "published"), EXACT)
def test_exact_published_counts(name, published):
    assert param_count(get_model(name)).total == published


ROUNDED = [
    # (model, published figure, relative tolerance = half the last published digit)
    ("gpt3-175b", 175.0e9, 0.005),  # Brown et al. 2020 Table 2.1: "175.0B"
    ("opt-175b", 175e9, 0.005),  # Zhang et al. 2022 Table 1: "175B"
    ("llama3-405b", 405e9, 0.0025),  # Dubey et al. 2024 Table 3: "405B"
    ("deepseek-v3", 671e9, 0.00075),  # DeepSeek-V3 report (arXiv:2412.19437) abstract: "671B"
    ("qwen3-8b", 8.2e9, 0.006),  # Qwen3-8B model card: "8.2B"
    ("qwen3-30b-a3b", 30.5e9, 0.0016),  # Qwen3-30B-A3B model card: "30.5B"
]


@pytest.mark.parametrize(("name", "published", "rel"), ROUNDED)
def test_rounded_published_counts(name, published, rel):
    assert param_count(get_model(name)).total == pytest.approx(published, rel=rel)


@pytest.mark.parametrize(("name", "published", "digit"), [
    ("deepseek-v3", 37e9, 1e9),  # report abstract: "37B activated for each token"
    ("qwen3-30b-a3b", 3.3e9, 0.1e9),  # model card: "3.3B activated"
])
def test_activated_counts_cut_to_their_last_digit(name, published, digit):
    # DeepSeek and Qwen cut (do not round) activated counts: 37.55B is "37B", 3.35B "3.3B"
    assert published <= param_count(get_model(name)).active < published + digit


def test_mixtral_active_parameters():
    # Jiang et al. 2024 (Mixtral of Experts), section 2: "each token has access to 47B
    # parameters, but only uses 13B active parameters"; the announcement says 12.9B.
    assert param_count(get_model("mixtral-8x7b")).active == pytest.approx(12.9e9, abs=0.05e9)


def test_qwen2_non_embedding_excluding_head():
    # Qwen2 technical report, Table 1: Qwen2-7B "Non-Emb Params 6.5B"; Qwen counts neither the
    # embedding nor the untied LM head, i.e. our layers_total + final norm.
    p = param_count(get_model("qwen2-7b"))
    assert p.layers_total + p.final_norm == pytest.approx(6.5e9, abs=0.05e9)


def test_seeds_003_quotes_non_embedding_counts():
    # seeds/003: "GPT-2: ~85 million parameters", "GPT-2 Large: ~708 million parameters".
    assert round(param_count(get_model("gpt2")).non_embedding / 1e6) == 85
    assert round(param_count(get_model("gpt2-large")).non_embedding / 1e6) == 708


def test_mingpt_unties_the_head():
    # minGPT's separate lm_head adds vocab x hidden = 50257 * 1280 = 64,328,960 parameters to
    # GPT-2 Large: 774,030,080 + 64,328,960 = 838,359,040 trainable parameters.
    assert param_count(get_model("mingpt-gpt2-large")).total == 838_359_040
    assert param_count(get_model("mingpt-gpt2")).total == 124_439_808 + 50257 * 768
