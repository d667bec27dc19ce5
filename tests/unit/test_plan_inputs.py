"""Inputs the estimate used to accept or count wrongly (review A4, A6, A8, A9, B8, B9, C)."""

import json
import math

import numpy as np
import pytest

from willitscale.errors import ConfigError
from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario
from willitscale.step.buckets import MAX_BUCKET_ROWS, MIB, last_end, uniform_bucket_runs

A100 = {"gpu": "a100-80gb", "gpus_per_node": 8, "seq_len": 2048, "hfu": 0.5}


# -- A4: bucket caps ---------------------------------------------------------------------------

def test_a_tiny_bucket_cap_is_a_clear_error(cli):
    # --bucket-cap 1B raised MemoryError (1 byte buckets: 8e9 of them for 2B fp32 gradients)
    code, _, err = cli("estimate", "--params", "2e9", "--gpu", "a100-80gb", "--seq-len", "2048",
                       "--bucket-cap", "1B")
    assert code == 2 and "bucket_cap" in err and "64 KiB" in err


def test_many_uniform_buckets_are_costed_in_runs():
    # 70B fp32 gradients = 2.8e11 B in 64 KiB buckets: 1 MiB first, then
    # floor((2.8e11 - 2^20) / 2^16) = 4,272,444 full ones and a remainder: 34 s before, now at
    # most MAX_BUCKET_ROWS rows that still add up to every bucket and every byte
    total, cap = 70e9 * 4, 64 * 1024
    sizes, ready, counts = uniform_bucket_runs(total, first_cap=MIB, cap=cap)
    full = math.floor((total - MIB) / cap)
    assert len(sizes) <= MAX_BUCKET_ROWS
    assert counts.sum() == 1 + full + 1
    assert sizes.sum() == pytest.approx(total)
    assert ready[-1] == pytest.approx(1.0) and np.all(np.diff(ready) > 0)


def test_runs_end_at_most_one_run_late():
    # 2,000 identical 1-unit buckets ready uniformly over a backward of 1 s, each taking 0.6 ms:
    # exact (one row per bucket) vs runs of <= 2,000 / 48 buckets. A run launches when its last
    # bucket is ready, so its end is late by at most one run's share of backward, 1/48 s.
    total = 1 + 2000.0
    exact = uniform_bucket_runs(total, first_cap=1.0, cap=1.0, max_rows=10_000)
    runs = uniform_bucket_runs(total, first_cap=1.0, cap=1.0, max_rows=50)
    end = lambda s, r, c: float(last_end(r, 0.6e-3 * c))  # noqa: E731
    e_exact, e_runs = end(*exact), end(*runs)
    assert len(runs[0]) <= 50
    assert e_exact <= e_runs <= e_exact + 1 / 48


def test_an_absurd_parameter_count_is_a_verdict_not_a_crash(cli):
    # --params 1e30 raised ValueError from a bucket array of 1.5e23 elements
    code, out, _ = cli("estimate", "--params", "1e30", "--gpu", "a100-80gb", "--nodes", "2",
                       "--seq-len", "2048", "--json")
    assert code == 1 and json.loads(out)["reason"] == "out_of_memory"


# -- A6: a measured step faster than peak ------------------------------------------------------

def test_a_measured_step_faster_than_peak_is_an_error():
    # 7e9 params x 4096 tokens: 6 x 7e9 x 4096 = 1.720e14 FLOPs = 0.5514 s at the A100's 312
    # TFLOP/s, plus fused AdamW's 28 B x 7e9 / 2.039 TB/s = 0.0961 s: at least 0.6475 s. 1 ms
    # gave an MFU of 1.018.
    base = {**A100, "params": 7e9, "seq_len": 4096, "gpus_per_node": 1, "hfu": None}
    with pytest.raises(ConfigError, match=r"compute-time-per-step.*> 0\.647"):
        estimate(build_scenario({**base, "step_time_one_gpu": 1e-3}), allow_oom=True)
    with pytest.raises(ConfigError):
        estimate(build_scenario({**base, "step_time_one_gpu": 0.64}), allow_oom=True)
    est = estimate(build_scenario({**base, "step_time_one_gpu": 0.7}), allow_oom=True)
    assert est.step_time == pytest.approx(0.7) and est.mfu < 1


# -- A8: a HF config's sequence length ---------------------------------------------------------

def test_hf_config_sequence_length_is_labelled_as_from_the_config(tmp_path):
    # Llama 3.1 8B: max_position_embeddings 131,072 after rope_scaling from 8,192. The default is
    # the pretraining length it implies, labelled as such, never "training sequence length".
    from pathlib import Path

    config = json.loads((Path(__file__).parents[1] / "data/hf_configs/llama3-8b.json").read_text())
    config.update(max_position_embeddings=131072, rope_scaling={
        "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192, "rope_type": "llama3"})
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    scenario = build_scenario({"model": str(path), "gpu": "h100", "nodes": 1})
    assert scenario.seq_len == 8192
    note = next(d for d in scenario.defaults_applied if d.startswith("seq_len"))
    assert "config.json" in note and "--seq-len" in note
    assert "training sequence length" not in note
    catalog = build_scenario({"model": "llama2-7b", "gpu": "h100"})
    assert any("training sequence length" in d for d in catalog.defaults_applied)


# -- A9: memory ----------------------------------------------------------------------------------

def test_estimate_judges_fits_as_the_planner_does(cli):
    from willitscale.memory.stage import DEFAULT_MEMORY_FRACTION
    from willitscale.plan.search import SearchSpace

    # the context, NCCL and the allocator's margin are counted, so a plan may fill the GPU
    assert SearchSpace().memory_fraction == DEFAULT_MEMORY_FRACTION == 1.0
    # 3.5e9 params in DDP under autocast: 4 + 4 + 8 state + 4 bucket copy + 2 autocast copies =
    # 22 B x 3.5e9 = 77.0 GB allocated, + 8.5 MB cuBLAS, 0.51 GiB context, 688 MiB NCCL = 78.3 GB:
    # under the 85.9 GB of an 80 GiB A100 by 7.6 GB (activations unknown in --params mode: no
    # verdict beyond "the state fits")
    args = ["estimate", "--params", "3.5e9", "--gpu", "a100-80gb", "--nodes", "2",
            "--seq-len", "2048", "--json"]
    code, out, _ = cli(*args)
    d = json.loads(out)
    assert code == 0 and d["memory"]["verdict"] is None and d["memory"]["fits"] is None
    assert d["memory"]["allocated_bytes"] == pytest.approx(22 * 3.5e9 + 8_519_680)
    assert d["memory"]["limit_bytes"] == pytest.approx(80 * 2**30)
    # --memory-fraction 0.9 leaves 77.3 GB: 78.3 GB does not fit, as the planner would judge
    code, out, _ = cli(*args, "--memory-fraction", "0.9")
    assert code == 1 and json.loads(out)["reason"] == "out_of_memory"
    # 4.0e9 params: 88 GB allocated, over the GPU; the gradients as bucket views: 72 GB, fits
    code, out, _ = cli(*args[:2], "4.0e9", *args[3:])
    assert code == 1
    code, out, _ = cli(*args[:2], "3.7e9", *args[3:], "--gradient-as-bucket-view")
    assert code == 0


def test_fp32_training_keeps_4_byte_activations():
    from willitscale.memory.activations import activation_memory
    from willitscale.workload import get_model

    est = estimate(build_scenario({**A100, "model": "gpt2-large", "seq_len": 1024,
                                   "dtype": "fp32", "gpus_per_node": 2}))
    expect = activation_memory(get_model("gpt2-large"), 1024, 1, recompute="none", dtype_bytes=4)
    assert est.memory.activations == pytest.approx(float(expect.total))


# -- B8, B9: FLOPs and efficiency ------------------------------------------------------------------

def test_fp8_computes_faster_than_bf16_by_default():
    # Without a shape the flat defaults apply: bf16 HFU 0.50 x 989.4 TFLOP/s; fp8 HFU
    # 0.50 x 1.50 / 2 = 0.375 x 1978.9 (the 1.50x FP8 speed-up measured with FSDP2 on 128 H100,
    # cited in willitscale.compute.efficiency): fp8 compute = 0.5 x 989.4 / (0.375 x 1978.9) =
    # 1 / 1.5 of bf16's.
    setting = {"params": 2e9, "gpu": "h100", "seq_len": 2048, "gpus_per_node": 1}
    bf16 = estimate(build_scenario(setting))
    fp8 = estimate(build_scenario({**setting, "dtype": "fp8"}))
    assert fp8.compute / bf16.compute == pytest.approx(0.5 * 989.4 / (0.375 * 1978.9), rel=1e-3)


def test_causal_flash_attention_executes_half_the_scores_mfu_counts_them_all():
    # Llama 3 8B at s = 8192, q_dim 4096, 32 layers, no recomputation. Model FLOPs (PaLM) count
    # Q K^T and A V in full: 3 x 4 s q per token per layer. A causal FlashAttention kernel runs
    # k = (s + 1)/2 keys per query: 3 x 4 k q, plus its backward's rerun of Q K^T, 2 k q. So
    # model - executed = L q (12 s - 14 k) = L q (5 s - 7) per token.
    L, q, s = 32, 4096, 8192
    plan = {"model": "llama3-8b", "gpu": "h100", "gpus_per_node": 8, "seq_len": s}
    est = estimate(build_scenario(plan), allow_oom=True)
    tokens_per_gpu = s  # micro-batch 1 per GPU, one micro-step
    assert est.model_flops - est.executed_flops == pytest.approx(L * q * (5 * s - 7) * tokens_per_gpu,
                                                                 rel=1e-9)
    # standard attention computes every score: executed = model FLOPs without recomputation
    std = estimate(build_scenario({**plan, "flash_attention": False}), allow_oom=True)
    assert std.executed_flops == pytest.approx(std.model_flops)
    assert est.model_flops == pytest.approx(std.model_flops)


# -- C: boundary names -------------------------------------------------------------------------

def test_size_names_the_flag_a_zero_deadline_came_from(cli):
    code, _, err = cli("size", "--params", "175B", "--tokens", "300B", "--gpu", "h100",
                       "--utilization", "0.4", "--weeks", "0")
    assert code == 2 and "--weeks" in err and "seconds" not in err
    code, out, _ = cli("size", "--zflops", "430", "--gpu-tflops", "624", "--utilization", "0.3",
                       "--weeks", "1", "--json")
    d = json.loads(out)
    assert d["gpus"] == 3798 and d["gpu_peak_flop_per_s"] == pytest.approx(624e12)
