"""Named recomputation modes: parsing, the share of layers, memory and FLOPs per mode.

Derivations are Korthikanti et al. 2022's per-layer activation terms (16-bit activations,
dropout, standard attention, no parallelism): 34 s b h + 5 a s^2 b bytes per layer, of which
the MLP keeps 19 s b h (fc1 input 2, GeLU input 8, GeLU output 8, dropout mask 1).
"""

import pytest

from willitscale.errors import ConfigError
from willitscale.memory.activations import activation_memory
from willitscale.scenario.plan import Plan
from willitscale.workload.catalog import get_model
from willitscale.workload.flops import training_flops
from willitscale.workload.recompute import RecomputeMode, layer_share, parse_recompute

KORTHIKANTI = dict(flash_attention=False, dropout=True)
GPT3 = get_model("gpt3-175b")
S, B, H, A = 2048, 1, 12288, 96
SBH = S * B * H
SCORES = 5 * A * S * S * B


@pytest.mark.parametrize("text, rerun, layers, every, name", [
    ("none", "none", 0, 1, "none"),
    ("full", "full", 0, 1, "full"),
    ("modules:core_attn", "selective", 0, 1, "selective"),  # Megatron-Core's default module
    ("modules:mlp,core_attn", "modules:core_attn,mlp", 0, 1, "modules:core_attn,mlp"),
    ("layers:4", "full", 4, 1, "layers:4"),
    ("every:2", "full", 0, 2, "every:2"),
    ("every:1", "full", 0, 1, "full"),
])
def test_parse(text, rerun, layers, every, name):
    mode = parse_recompute(text)
    assert (mode.rerun, mode.layers, mode.every, mode.name) == (rerun, layers, every, name)


@pytest.mark.parametrize("text", ["bogus", "modules:", "modules:moe", "layers:0", "layers:x",
                                  "every:0", ""])
def test_bad_modes_are_config_errors(text):
    with pytest.raises(ConfigError):
        parse_recompute(text)


def test_mode_validates_itself():
    with pytest.raises(ConfigError):
        RecomputeMode(rerun="selective", layers=2)
    with pytest.raises(ConfigError):
        RecomputeMode(rerun="full", layers=2, every=2)


def test_plan_keeps_the_canonical_name():
    assert Plan(recompute="modules:mlp,core_attn").recompute == "modules:core_attn,mlp"
    with pytest.raises(ConfigError):
        Plan(recompute="sometimes")


def test_layer_share():
    # layers:4 of a 12-layer stage: 4/12; every:2: layers 0,2,..,10 = 6/12;
    # every:5: layers 0, 5, 10 = 3/12; layers:20 of 12: all
    assert float(layer_share(12, 4, 1)) == pytest.approx(4 / 12)
    assert float(layer_share(12, 0, 2)) == pytest.approx(6 / 12)
    assert float(layer_share(12, 0, 5)) == pytest.approx(3 / 12)
    assert float(layer_share(12, 20, 1)) == 1.0
    assert float(layer_share(12, 0, 1)) == 1.0


def test_mlp_module_drops_the_mlp_inner_tensors():
    # the MLP checkpoint keeps its input (2 sbh); the residual dropout mask (1 sbh) is outside the
    # module; dropped: GeLU input and output, 16 sbh. Kept: 34 - 16 = 18 sbh + 5 a s^2 b
    got = activation_memory(GPT3, S, B, recompute="modules:mlp", **KORTHIKANTI)
    assert got.per_layer == pytest.approx(18 * SBH + SCORES)
    assert got.recompute_transient == pytest.approx(16 * SBH)


def test_layernorm_module_drops_the_two_norm_outputs():
    # the two norms' 16-bit outputs (QKV and fc1 inputs), 2 + 2 sbh: 30 sbh + 5 a s^2 b kept
    got = activation_memory(GPT3, S, B, recompute="modules:layernorm", **KORTHIKANTI)
    assert got.per_layer == pytest.approx(30 * SBH + SCORES)


def test_all_modules():
    # core_attn (5 a s^2 b) + mlp (16 sbh) + layernorm (4 sbh): 14 sbh kept
    got = activation_memory(GPT3, S, B, recompute="modules:core_attn,layernorm,mlp", **KORTHIKANTI)
    assert got.per_layer == pytest.approx(14 * SBH)
    same = activation_memory(GPT3, S, B, recompute="modules:core_attn", **KORTHIKANTI)
    sel = activation_memory(GPT3, S, B, recompute="selective", **KORTHIKANTI)
    assert same.per_layer == sel.per_layer


def test_flops_of_a_share_of_layers():
    # layers:N / every:K rerun the forward of that share of the layers: extra recompute FLOPs
    # scale with it (the model has 96 layers: every:2 reruns 48, every:3 reruns 32)
    m = GPT3
    none = training_flops(m, S, recompute="none").layer_recompute_per_token
    full = training_flops(m, S, recompute="full").layer_recompute_per_token
    half = training_flops(m, S, recompute="every:2").layer_recompute_per_token
    third = training_flops(m, S, recompute="every:3").layer_recompute_per_token
    assert half == pytest.approx(none + 0.5 * (full - none))
    assert third == pytest.approx(none + (32 / 96) * (full - none))


def test_mlp_flops():
    # modules:mlp reruns the MLP's two GEMMs: 2 * 2 * h * 4h = 16 h^2 FLOPs per token
    none = training_flops(GPT3, S, recompute="none").layer_recompute_per_token
    mlp = training_flops(GPT3, S, recompute="modules:mlp").layer_recompute_per_token
    assert mlp - none == pytest.approx(16 * H * H)


def test_stage_memory_mixes_full_and_none_by_the_share():
    # GPT-3 175B, pp 8: 12 layers per stage, F micro-batches in flight, n bytes a layer keeps
    # without recomputation, c with full, e the embedding's, T = n the one-layer transient.
    # full = F (12 c + e) + T; layers:N = F (N c + (12 - N) n + e) + T, so
    # layers:N - full = (12 - N) F (n - c): layers:12 is full, every:2 (6 layers) over
    # layers:4 (8 layers not recomputed) is 6/8.
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario

    base = dict(model="gpt3-175b", gpu="a100-80gb", nodes=128, gpus_per_node=8, tp=8, pp=8,
                dp=16, global_batch=1536, seq_len=2048, zero=1, sequence_parallel=True)
    act = {r: estimate(build_scenario({**base, "recompute": r})).memory.activations
           for r in ("none", "full", "layers:12", "layers:4", "every:2")}
    assert act["layers:12"] == pytest.approx(act["full"])
    assert (act["every:2"] - act["full"]) / (act["layers:4"] - act["full"]) == pytest.approx(6 / 8)
    assert act["full"] < act["every:2"] < act["layers:4"] < act["none"]
