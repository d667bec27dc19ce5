"""Issue 10's acceptance targets for the compute model, each asserted as the issue states it.

Targets the model does not meet today are strict expected failures (``xfail(strict=True)``):
the test keeps the issue's bound, the reason gives the number we get, and the test fails as
soon as the model meets the bound (then the mark goes). No bound here is loosened.

Test-row errors come from the published-run set's **test** rows only (docs/validation.md, the
split rule committed before any constant was chosen); ``willitscale validate --published``
prints the same numbers.
"""

import pytest

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario
from willitscale.validation.published import PUBLISHED_RUNS
from willitscale.validation.published.errors import parallelism_of, row_errors, summary

TEST_ROWS = [r for r in PUBLISHED_RUNS if r.side == "test" and r.expressible]


@pytest.fixture(scope="module")
def test_summary():
    return summary(row_errors(TEST_ROWS))


def test_the_test_rows_span_what_the_issue_asks():
    # >= 40 rows, >= 15 on H100/H200/B200, >= 10 FSDP, >= 5 FP8
    assert len(TEST_ROWS) >= 40
    assert sum(r.gpu.startswith(("h100", "h200", "b200")) for r in TEST_ROWS) >= 15
    assert sum(parallelism_of(r).startswith("FSDP") for r in TEST_ROWS) >= 10
    assert sum(r.dtype == "fp8" for r in TEST_ROWS) >= 5


@pytest.mark.xfail(strict=True, reason="2 expressible test rows at >= 16K (olmo-core-7b-64k-fp8-"
                   "nomask, llama3-405b-128k-16384): the other long-context rows offload to the "
                   "CPU or mask within documents of unstated lengths, and XTuner's 8K-1M table "
                   "(a new group: fit by rule 4) leaves its ZeRO stage unstated (not expressible)")
def test_at_least_five_test_rows_at_sequence_16k_or_more():
    assert sum(r.seq_len >= 16384 for r in TEST_ROWS) >= 5


def test_test_rows_mean_absolute_error_at_most_10_percent(test_summary):
    assert test_summary.rows == len(TEST_ROWS)
    assert test_summary.mean_abs <= 0.10


def test_test_rows_bias_within_5_percent(test_summary):
    assert abs(test_summary.bias) <= 0.05


@pytest.mark.xfail(strict=True, reason="worst test rows +29.4% and +27.5% (Lambda's July 2023 "
                   "FlashAttention-2 GPT-3 2.7B runs on 8 and 1 H100, fp16, already timed with "
                   "FA2's H100 curves as the source states: attention is 11% of the step; the "
                   "same runs on A100 are +11% and +7%); every other test row is within 25%. "
                   "Former worst rows: MLPerf v4.0 GPT-3 175B on 10,752 H100 -32.4% -> +7.0% "
                   "(interleaved chunks sync their gradients under later chunks' backward, in "
                   "bf16 as the submission states); olmo-core-7b-64k-fp8-nomask +32.1% -> +21.6% "
                   "(ring attention's half-chunk calls and float32 merges costed); MLPerf v5.1 "
                   "Llama 3.1 8B on 256 B200 -26.6% -> -7.1% (bf16 gradients, as stated)")
def test_test_rows_worst_error_at_most_25_percent(test_summary):
    assert abs(test_summary.worst) <= 0.25


LLAMA_8B = {"model": "llama3-8b", "gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8, "dp": 8,
            "zero": 3, "micro_batch": 1, "seq_len": 8192, "global_batch": 8}


def test_llama3_8b_fsdp_h100_palm_mfu_between_030_and_050():
    # willitscale estimate --model llama3-8b --gpu h100-sxm --nodes 1 --gpus-per-node 8 --dp 8
    #   --zero 3 --micro-batch 1 --seq-len 8192 --global-batch 8
    # recomputation is not stated: the estimate fits it (estimation.fit): without it the step
    # is 'tight' in memory (56 GiB allocated, the allocator's typical reserve over 80 GiB), so
    # it takes full recomputation: PaLM-style MFU 0.457
    est = estimate(build_scenario(LLAMA_8B))
    assert 0.30 <= est.mfu <= 0.50


@pytest.mark.xfail(strict=True, reason="PaLM-style MFU 0.591 with --recompute none: the per-op "
                   "model runs this single-node FSDP step compute-bound at ~0.62 of peak in the "
                   "GEMMs; the 8B fit rows are over-predicted by +12% too")
def test_llama3_8b_without_recomputation_palm_mfu_at_most_050():
    est = estimate(build_scenario({**LLAMA_8B, "recompute": "none"}))
    assert 0.30 <= est.mfu <= 0.50


def test_llama3_8b_reports_attention_as_a_named_share():
    est = estimate(build_scenario(LLAMA_8B))
    assert est.compute_kinds is not None
    assert 0.0 < est.compute_kinds.share("attention") < 1.0
    assert est.to_json()["compute_by_kind"]["attention_share"] == est.compute_kinds.share("attention")


GPT3 = {"model": "gpt3-175b", "gpu": "h100-sxm", "nodes": 64, "gpus_per_node": 8, "tp": 4,
        "pp": 8, "zero": 1, "recompute": "full", "sequence_parallel": True, "global_batch": 2048,
        "seq_len": 2048}


def test_gpt3_175b_fp8_is_125_to_150_times_faster_than_bf16():
    # met once collectives are costed as NCCL runs them (issue 12) and the sustained factors
    # refitted on the fit rows under those costs: 24.30 s / 16.44 s = 1.478x at Hopper's 0.820
    # (24.43 s / 16.51 s = 1.479x at 0.815, 24.18 s / 16.36 s = 1.477x at 0.825; with the alpha-beta collectives it
    # was 23.63 s / 15.72 s = 1.504x, a strict xfail)
    # willitscale estimate --model gpt3-175b --gpu h100-sxm --nodes 64 --gpus-per-node 8 --tp 4
    #   --pp 8 --zero 1 --recompute full --sequence-parallel --global-batch 2048 --seq-len 2048
    #   --dtype bf16 / --dtype fp8
    bf16 = estimate(build_scenario({**GPT3, "dtype": "bf16"}), allow_oom=True)
    fp8 = estimate(build_scenario({**GPT3, "dtype": "fp8"}), allow_oom=True)
    assert 1.25 <= bf16.step_time / fp8.step_time <= 1.5


def test_gpt3_175b_fp8_is_faster_but_not_twice():
    # a weaker invariant that holds whatever the constants: FP8 speeds up the linear layers only
    # (attention, memory-bound work and communication stay), so the step is faster, and less
    # than the 2x of the peaks
    bf16 = estimate(build_scenario({**GPT3, "dtype": "bf16"}), allow_oom=True)
    fp8 = estimate(build_scenario({**GPT3, "dtype": "fp8"}), allow_oom=True)
    assert 1.0 < bf16.step_time / fp8.step_time < 2.0


def _async_tp_gain(model: str) -> float:
    # Llama 3 with TP 8 + sequence parallelism inside each H100 node, FSDP across 8 nodes, 8K
    # tokens, selective recomputation (the post's exact plan is not stated: an assumption)
    s = {"model": model, "gpu": "h100-sxm", "nodes": 8, "gpus_per_node": 8, "tp": 8, "dp": 8,
         "zero": 3, "sequence_parallel": True, "micro_batch": 1, "seq_len": 8192,
         "global_batch": 64, "recompute": "selective"}
    plain = estimate(build_scenario(s), allow_oom=True)
    overlapped = estimate(build_scenario({**s, "tp_comm_overlap": True}), allow_oom=True)
    return plain.step_time / overlapped.step_time


def test_async_tp_gains_a_few_percent_on_llama3_70b():
    # PyTorch's async TP: "~8% E2E speedup in Llama3 70B" (discuss.pytorch.org/t/209487,
    # "Introducing Async Tensor Parallelism in PyTorch", TL;DR): the issue's bound is "a few
    # percent to ~10%"; we get 1.097x
    assert 1.02 <= _async_tp_gain("llama3-70b") <= 1.10


@pytest.mark.xfail(strict=True, reason="1.193x on Llama 3 8B: the chunked overlap hides more "
                   "than the ~8% the post measured on its 7B/8B")
def test_async_tp_gains_a_few_percent_on_llama3_8b():
    # same post: "~8% E2E speedup in Llama3 7B"
    assert 1.02 <= _async_tp_gain("llama3-8b") <= 1.10
