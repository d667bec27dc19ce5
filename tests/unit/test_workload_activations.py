"""Activation memory: Korthikanti et al. 2022's formulas and their generalisation."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from willitscale.errors import ConfigError
from willitscale.memory.activations import activation_memory
from willitscale.workload.catalog import get_model
from willitscale.workload.transformer import Transformer

# Korthikanti et al. 2022 assume GPT layers, 16-bit activations, dropout, standard attention.
KORTHIKANTI = dict(flash_attention=False, dropout=True)
GPT3 = get_model("gpt3-175b")
S, B, H, A = 2048, 1, 12288, 96


def test_no_parallelism_is_34_plus_5as_over_h():
    # section 4.1: s b h (34 + 5 a s / h)
    got = activation_memory(GPT3, S, B, **KORTHIKANTI).per_layer
    assert got == S * B * H * (34 + 5 * A * S / H)


def test_tensor_parallel():
    # section 4.2.1: s b h (10 + 24/t + 5 a s / (h t))
    got = activation_memory(GPT3, S, B, tp=8, **KORTHIKANTI).per_layer
    assert got == pytest.approx(S * B * H * (10 + 24 / 8 + 5 * A * S / (H * 8)))


def test_tensor_and_sequence_parallel():
    # section 4.2.2: s b h / t (34 + 5 a s / h)
    got = activation_memory(GPT3, S, B, tp=8, sequence_parallel=True, **KORTHIKANTI).per_layer
    assert got == pytest.approx(S * B * H / 8 * (34 + 5 * A * S / H))


def test_selective_recompute_drops_the_5as_over_h_term():
    # section 5: with sequence parallel + selective recomputation, 34 s b h / t
    got = activation_memory(GPT3, S, B, tp=8, sequence_parallel=True, recompute="selective", **KORTHIKANTI)
    assert got.per_layer == pytest.approx(34 * S * B * H / 8)
    # what is dropped comes back one layer at a time: 5 a s^2 b / t
    assert got.recompute_transient == pytest.approx(5 * A * S * S * B / 8)


def test_full_recompute_keeps_the_layer_input():
    # section 5: full recomputation stores 2 s b h per layer
    got = activation_memory(GPT3, S, B, recompute="full", **KORTHIKANTI)
    assert got.per_layer == 2 * S * B * H
    assert got.recompute_transient == S * B * H * (34 + 5 * A * S / H)


def test_output_layer():
    # last stage: final norm input + LM head input 4 s b h, fp32 cross-entropy 4 s b V (t = 1)
    got = activation_memory(GPT3, S, B, **KORTHIKANTI)
    assert got.head == 4 * S * B * H + 4 * S * B * 50257
    assert got.embedding == S * B * H  # embedding dropout mask, 1 byte


def test_llama2_70b_by_hand():
    # Flash attention, no dropout, bf16, s = 4096, b = 1, t = 1; h 8192, q 8192, kv 1024, f 28672.
    # norms 2 * 2sbh; attention: qkv input 2sbh + Q,K,V 2sb(8192 + 2048) + out-proj input 2sb*8192
    # scores: fp32 log-sum-exp 4 * 64 heads * s b; MLP: input 2sbh + gate, up, down-input 3*2*sb*f.
    s, h = 4096, 8192
    got = activation_memory(get_model("llama2-70b"), s, 1)
    assert got.layer_norms == 4 * s * h
    assert got.layer_attention == 2 * s * h + 2 * s * 10240 + 2 * s * 8192
    assert got.layer_attention_scores == 4 * 64 * s
    assert got.layer_mlp == 2 * s * h + 6 * s * 28672
    assert got.per_layer == got.layer_no_recompute


def test_gqa_kv_replicated_when_fewer_kv_heads_than_ranks():
    # Llama 2 70B at t = 16: 8 kv heads cannot split 16 ways; each rank keeps one (128 wide).
    s = 1024
    got = activation_memory(get_model("llama2-70b"), s, 1, tp=16)
    assert got.layer_attention == 2 * s * 8192 + 2 * s * (8192 / 16 + 2 * 128) + 2 * s * 8192 / 16


def test_moe_by_hand():
    # Mixtral, s = 1024, b = 1, flash, no dropout: MLP part = norm-output 2sbh + router fp32 4sbE
    # + 2 routed copies x (input 2sbh + output 2sbh + gate/up/down-input 3*2*sb*f).
    s, h, f = 1024, 4096, 14336
    got = activation_memory(get_model("mixtral-8x7b"), s, 1)
    assert got.layer_mlp == 2 * s * h + 4 * s * 8 + 2 * (4 * s * h + 6 * s * f)


def test_vectorized_over_seq_micro_batch_and_tp():
    m = get_model("llama3-8b")
    seqs, mbs, tps = np.array([1024, 4096]), np.array([1, 4]), np.array([1, 8])
    vec = activation_memory(m, seqs, mbs, tp=tps, recompute="selective", sequence_parallel=True)
    for i in range(2):
        one = activation_memory(m, int(seqs[i]), int(mbs[i]), tp=int(tps[i]), recompute="selective",
                                sequence_parallel=True)
        assert vec.per_layer[i] == pytest.approx(one.per_layer)
        assert vec.total[i] == pytest.approx(one.total)


def test_stage_bytes():
    got = activation_memory(GPT3, S, B, recompute="full")
    assert got.stage_bytes(96) == pytest.approx(got.total)
    assert got.stage_bytes(12, first=False, last=False) == pytest.approx(12 * got.per_layer + got.recompute_transient)


def test_bad_input():
    with pytest.raises(ConfigError, match="micro_batch"):
        activation_memory(GPT3, S, 0)
    with pytest.raises(ConfigError, match="recompute"):
        activation_memory(GPT3, S, 1, recompute="partial")


@settings(max_examples=60, deadline=None)
@given(s=st.integers(1, 8192), b=st.integers(1, 8), t=st.sampled_from([1, 2, 4, 8]),
       sp=st.booleans(), flash=st.booleans(), dropout=st.booleans())
def test_invariants(s, b, t, sp, flash, dropout):
    m = Transformer(name="t", layers=4, hidden=512, heads=8, kv_heads=2, vocab=1000, position="rope",
                    gated_mlp=True, ffn_hidden=1408)
    kw = dict(tp=t, sequence_parallel=sp, flash_attention=flash, dropout=dropout)
    none, sel, full = (activation_memory(m, s, b, recompute=r, **kw).per_layer for r in ("none", "selective", "full"))
    assert full <= sel <= none
    # more tensor parallelism never needs more memory per rank
    assert activation_memory(m, s, b, recompute="none", **{**kw, "tp": 2 * t}).per_layer <= none
    # memory is linear in the micro-batch
    assert activation_memory(m, s, 2 * b, **kw).total == pytest.approx(2 * activation_memory(m, s, b, **kw).total)


def test_recompute_and_sequence_parallel_as_arrays():
    # The planner batches plans: recompute modes and SP flags may be arrays too.
    m = get_model("llama2-7b")
    modes = np.array(["none", "selective", "full"])
    sps = np.array([False, True, True])
    vec = activation_memory(m, 4096, 1, recompute=modes, tp=4, sequence_parallel=sps)
    for i in range(3):
        one = activation_memory(m, 4096, 1, recompute=str(modes[i]), tp=4, sequence_parallel=bool(sps[i]))
        assert vec.per_layer[i] == pytest.approx(one.per_layer)
        assert vec.total[i] == pytest.approx(one.total)
    with pytest.raises(ConfigError, match="recompute"):
        activation_memory(m, 4096, 1, recompute=np.array(["none", "half"]))
