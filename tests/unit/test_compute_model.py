"""The per-op compute model in an estimate: the split by op kind adds up, recomputation reruns
its op set, FP8 changes only the linear layers, eager kernels move more bytes, MFU is reported
two ways, and a flat --hfu replaces the model."""

import numpy as np
import pytest

from willitscale.compute.model import op_costs
from willitscale.estimation.estimate import estimate
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.step.engine import make_context
from willitscale.step.tensor import overlap_exposed
from willitscale.workload.catalog import get_model

LLAMA = {"model": "llama3-8b", "gpu": "h100-sxm", "nodes": 1, "gpus_per_node": 8, "zero": 3,
         "micro_batch": 1, "seq_len": 8192, "global_batch": 8}


def _ops(settings):
    sc = build_scenario(settings)
    ctx = make_context(sc)
    return {o.name: o for o in op_costs(ctx.spec, PlanBatch.from_plans([sc.plan]), detail=True).ops}, ctx


def test_the_split_by_op_kind_adds_up_to_compute():
    est = estimate(build_scenario(LLAMA))
    k = est.compute_kinds
    assert k.total == pytest.approx(est.compute, rel=1e-9)
    assert k.forward + k.backward == pytest.approx(est.compute, rel=1e-9)
    assert est.compute_model == "per-op model"


def test_recomputation_reruns_its_op_set():
    ops, ctx = _ops(LLAMA)
    layer = [o for n, o in ops.items() if n not in ("final norm", "LM head", "cross-entropy", "embedding")]
    sc = {m: build_scenario({**LLAMA, "recompute": m}) for m in ("none", "selective", "full")}
    rec = {m: float(op_costs(ctx.spec, PlanBatch.from_plans([s.plan])).layer_recompute[0])
           for m, s in sc.items()}
    assert rec["none"] == 0.0
    assert rec["selective"] == pytest.approx(float(np.sum(ops["attention core"].fwd)))
    assert rec["full"] == pytest.approx(sum(float(np.sum(o.fwd)) for o in layer))


def test_fp8_speeds_up_the_linear_layers_only():
    bf16, _ = _ops(LLAMA)
    fp8, _ = _ops({**LLAMA, "dtype": "fp8"})
    for name in ("QKV", "attention output", "MLP up", "MLP down"):
        assert float(fp8[name].fwd[0]) < 0.7 * float(bf16[name].fwd[0]), name
        assert f"{name} fp8 casts" in fp8
    for name in ("attention core", "LM head", "input norm", "activation", "cross-entropy"):
        assert float(fp8[name].fwd[0]) == pytest.approx(float(bf16[name].fwd[0])), name


def test_eager_rmsnorm_moves_eight_times_the_bytes():
    # fused RMSNorm: 2 + 2 bytes per element forward; eager: 32 (compute.ops), 6 kernels not 1
    fused, ctx = _ops(LLAMA)
    eager, _ = _ops({**LLAMA, "fusion": "eager"})
    gap = ctx.spec.curves.memory.kernel_overhead
    f = float(fused["input norm"].fwd[0]) - gap
    e = float(eager["input norm"].fwd[0]) - 6 * gap
    assert e / f == pytest.approx(32 / 4)


def test_mfu_two_ways():
    # PaLM-style counts causal attention in full: per token and layer 3 x 4 s q FLOPs; the
    # causal-adjusted MFU counts (s + 1)/2 keys per query. Their model FLOPs differ by
    # 3 x 4 q (s - (s + 1)/2) x L per token.
    est = estimate(build_scenario(LLAMA))
    m = get_model("llama3-8b")
    s, tokens = 8192, 8 * 8192
    diff = 3 * 4 * m.q_dim * (s - (s + 1) / 2) * m.layers * tokens / 8
    peak = est.peak_flops
    assert (est.mfu - est.mfu_causal) * est.step_time * peak == pytest.approx(diff, rel=1e-9)
    js = est.to_json()
    assert js["mfu_palm"] == est.mfu and js["mfu_causal_adjusted"] == est.mfu_causal


def test_attention_share_rises_with_sequence_length():
    # the acceptance command of issue 10 at 2K/8K/32K/64K (recomputation unstated: from 8K on
    # the estimate fits full recomputation, which fits in memory; allow_oom in case it did not)
    shares = [estimate(build_scenario({**LLAMA, "seq_len": s}), allow_oom=True)
              .compute_kinds.share("attention") for s in (2048, 8192, 32768, 65536)]
    assert all(a < b for a, b in zip(shares, shares[1:]))
    assert shares[0] < 0.1 and shares[-1] > 0.5


def test_a_flat_efficiency_replaces_the_per_op_model():
    est = estimate(build_scenario({**LLAMA, "hfu": 0.4}))
    assert est.compute_kinds is None
    assert est.compute_model.startswith("flat HFU 0.4")
    # executed FLOPs at 0.4 x peak
    assert est.compute == pytest.approx(est.executed_flops / (0.4 * est.peak_flops), rel=1e-6)


def test_no_curves_falls_back_to_the_flat_default():
    est = estimate(build_scenario({**LLAMA, "gpu": "v100-sxm2-32gb", "dtype": "fp16",
                                   "zero": 3, "seq_len": 2048}), allow_oom=True)
    assert est.compute_kinds is None and "HFU 0.5" in est.compute_model


def test_tp_overlap_hides_all_but_one_chunk():
    # t = 4: at most 3/4 of min(comm, compute) hides
    comm = np.array([[4.0, 4.0, 4.0]])
    compute = np.array([[10.0, 2.0, 0.0]])
    got = overlap_exposed(comm, compute, np.array([4.0]))
    assert got.tolist() == [[1.0, 2.5, 4.0]]


def test_the_html_report_splits_compute_by_op_kind():
    from willitscale.report.html import _compute_table
    from willitscale.report.verdict import percent

    est = estimate(build_scenario(LLAMA))
    table = _compute_table(est)
    k = est.compute_kinds
    for name, v in (("GEMM", k.gemm), ("attention", k.attention), ("memory-bound", k.memory)):
        assert name in table and percent(v / k.total) in table
    flat = _compute_table(estimate(build_scenario({**LLAMA, "hfu": 0.4})))
    assert "no split by op kind" in flat and "HFU 0.4" in flat


def test_the_timeline_spans_carry_the_split_by_op_kind():
    est = estimate(build_scenario(LLAMA))
    k = est.compute_kinds
    fwd = next(s for s in est.timeline.spans if s.kind == "forward")
    shares = {n: fwd.args[f"{n}_share"] for n in ("gemm", "attention", "memory", "overhead")}
    assert sum(shares.values()) == pytest.approx(1.0, abs=1e-3)
    # the backward moves 2.5x the attention FLOPs and 2x the GEMM FLOPs: attention's share of
    # the backward is at least its share of the forward
    bwd = next(s for s in est.timeline.spans if s.kind == "backward")
    assert bwd.args["attention_share"] >= shares["attention"] > 0
    assert k.share("attention") > 0


def _attention(settings):
    ops, ctx = _ops(settings)
    return ops["attention core"], ctx.spec


def _expected_forward(spec, tokens, keys, length, causal):
    # fused forward (compute.attention): 4 T keys q FLOPs at peak x efficiency x L / (L + half)
    # of the curve for the mask, at the length L one document's tiles see, plus one kernel's cost
    c = spec.curves.attention_for(spec.kernel, "forward", causal, spec.head_dim)
    rate = spec.attention_peak * c.efficiency * length / (length + c.seq_half)
    return 4 * tokens * keys * spec.q_dim / rate + spec.curves.memory.kernel_overhead


def test_document_masking_runs_each_document_as_its_own_causal_sequence():
    # llama3-8b, one GPU's micro-batch of 8192 tokens packing documents of 1024: each query
    # sees (1024 + 1) / 2 keys, at the causal curve's rate for 1024-token sequences
    plain, spec = _attention(LLAMA)
    docs, dspec = _attention({**LLAMA, "document_length": 1024})
    assert dspec.keys_causal == pytest.approx(1025 / 2)
    assert float(docs.fwd[0]) == pytest.approx(_expected_forward(dspec, 8192, 1025 / 2, 1024, True))
    assert float(plain.fwd[0]) == pytest.approx(_expected_forward(spec, 8192, 8193 / 2, 8192, True))
    assert float(docs.fwd[0]) < float(plain.fwd[0]) / 4
    # documents as long as the sample are no mask at all
    same, _ = _attention({**LLAMA, "document_length": 8192})
    assert float(same.fwd[0]) == pytest.approx(float(plain.fwd[0]))


def test_document_masking_with_context_parallelism():
    # s = 65536 over cp = 8: chunks of 8192 tokens per rank. Documents of 4096 fit in a chunk
    # (whole on one rank: the causal curve at 4096, no ring merges); documents of 16384 span
    # ranks and run the ring schedule: step 0 (1/8 of the FLOPs) causal at the chunk, the other
    # 7/8 as half-chunk calls (non-causal at 4096), with the masked keys' FLOPs and the merges
    base = {**LLAMA, "seq_len": 65536, "cp": 8, "zero": 3, "global_batch": 1}
    short_ops, sctx = _ops({**base, "document_length": 4096})
    spec = sctx.spec
    assert float(short_ops["attention core"].fwd[0]) == pytest.approx(
        _expected_forward(spec, 8192, 4097 / 2, 4096, True))
    assert float(short_ops["ring attention merges"].fwd[0]) == 0.0
    long, lspec = _attention({**base, "document_length": 16384})
    rate = lambda causal, n: (lambda c: lspec.attention_peak * c.efficiency * n / (n + c.seq_half))(  # noqa: E731
        lspec.curves.attention_for(lspec.kernel, "forward", causal, lspec.head_dim))
    flops = 4 * 8192 * lspec.keys_causal * lspec.q_dim
    assert lspec.keys_causal == pytest.approx(16385 / 2)
    assert float(long.fwd[0]) == pytest.approx(
        flops * (1 / 8 / rate(True, 8192) + 7 / 8 / rate(False, 4096)) + lspec.curves.memory.kernel_overhead)
    # documents as long as the sample: plain ring attention, its merges included
    whole, _ = _ops({**base, "document_length": 65536})
    plain, _ = _ops(base)
    for name in ("attention core", "ring attention merges"):
        assert float(whole[name].fwd[0]) == pytest.approx(float(plain[name].fwd[0])), name


def test_document_length_never_makes_a_step_slower_as_it_shrinks():
    # an invariant, not a number: shorter documents mean fewer keys per query and shorter (or
    # no) ring steps, so the step time is non-increasing as d shrinks, with cp = 1 and cp = 2,
    # across the chunk boundary (d = s / cp) and up to d = s (= no mask: the plain step)
    for cp in (1, 2):
        base = {**LLAMA, "cp": cp, "zero": 3, "recompute": "full", "sequence_parallel": False}
        plain = estimate(build_scenario(base)).step_time
        times = [estimate(build_scenario({**base, "document_length": d})).step_time
                 for d in (8192, 8191, 6000, 4097, 4096, 4095, 2048, 512)]
        assert times[0] == pytest.approx(plain, rel=1e-12)
        assert all(a >= b for a, b in zip(times, times[1:])), (cp, times)


def test_document_masking_keeps_the_model_flops_mfu_counts():
    # PaLM-style MFU counts the whole sequence's attention (the published convention): the
    # same model FLOPs with and without documents; the causal-adjusted MFU counts the keys the
    # kernel runs (within documents), and the step is faster
    plain = estimate(build_scenario({**LLAMA, "recompute": "full"}))
    docs = estimate(build_scenario({**LLAMA, "recompute": "full", "document_length": 1024}))
    assert docs.model_flops == pytest.approx(plain.model_flops, rel=1e-12)
    assert docs.step_time < plain.step_time
    m = get_model("llama3-8b")
    # causal-adjusted model FLOPs per GPU differ by 3 x 4 q (8193/2 - 1025/2) x L per token
    diff = 3 * 4 * m.q_dim * (8193 / 2 - 1025 / 2) * m.layers * 8 * 8192 / 8
    causal = lambda e: e.mfu_causal * e.step_time * e.peak_flops  # noqa: E731
    assert causal(plain) - causal(docs) == pytest.approx(diff, rel=1e-9)


def test_ring_attention_runs_its_own_chunk_causal_and_the_rest_as_half_chunk_calls():
    # llama3-8b, s = 65536 over cp = 8: 8192 tokens per rank. Step 0 (1/8 of the FLOPs): the
    # causal curve at 8192; the other 7 steps: the non-causal curve at 4096 (half-chunk calls)
    base = {**LLAMA, "seq_len": 65536, "cp": 8, "zero": 3, "global_batch": 1}
    op, spec = _attention(base)
    keys = 65537 / 2
    flops = 4 * 8192 * keys * spec.q_dim
    rate = lambda causal, n: (lambda c: spec.attention_peak * c.efficiency * n / (n + c.seq_half))(  # noqa: E731
        spec.curves.attention_for(spec.kernel, "forward", causal, spec.head_dim))
    expected = flops * (1 / 8 / rate(True, 8192) + 7 / 8 / rate(False, 4096))
    assert float(op.fwd[0]) == pytest.approx(expected + spec.curves.memory.kernel_overhead)


def test_ring_attention_merges_move_their_bytes():
    # compute.attention.ring_merge_bytes, T = 8192 tokens, q = 4096, kv = 1024 (llama3-8b,
    # 8 KV heads), cp = 8: forward 6 (cast) + 7 x 10 (merges) + 6 (cast back) = 82 bytes per
    # query element; backward the same over dq, dk, dv: T (q + 2 kv) elements
    from willitscale.compute.attention import ring_merge_bytes
    fwd, bwd = ring_merge_bytes(tokens=8192, q_dim_per_gpu=4096, kv_dim_per_gpu=1024, cp=8)
    assert float(fwd) == 82 * 8192 * 4096
    assert float(bwd) == 82 * 8192 * (4096 + 2 * 1024)
    none = ring_merge_bytes(tokens=8192, q_dim_per_gpu=4096, kv_dim_per_gpu=1024, cp=1)
    assert float(none[0]) == 0 and float(none[1]) == 0
    ops, ctx = _ops({**LLAMA, "seq_len": 65536, "cp": 8, "zero": 3, "global_batch": 1})
    merges = ops["ring attention merges"]
    mem = ctx.spec.curves.memory
    assert float(merges.fwd[0]) == pytest.approx(82 * 8192 * 4096 / mem.bandwidth + 9 * mem.kernel_overhead)
