"""The model-parallel timeline (review R2, R3): every collective the step issues is drawn on the
comms lane (hidden and exposed), the pipeline bubble is its own kind, the last backward carries
its overlap slowdown, and collapsed micro-batches say how many they are in their args."""

from __future__ import annotations

import pytest

from willitscale.estimation.estimate import estimate
from willitscale.estimation.steptimeline import MAX_DRAWN_MICRO_STEPS
from willitscale.scenario.build import build_scenario

#: ZeRO-2 on PCIe nodes: the reduce-scatter runs every micro-batch, nearly all of it hidden
ZERO_PCIE = {"model": "gpt2-large", "gpu": "a100-80gb-pcie", "nodes": 2, "gpus_per_node": 4,
             "zero": 2, "micro_batch": 4, "grad_accum": 4, "seq_len": 1024}
CASES = {
    "zero2-pcie": ZERO_PCIE,
    # expert gradients over their own group, TP, EP all-to-alls, ZeRO-1's weight all-gather
    "moe": {"model": "mixtral-8x7b", "gpu": "h100", "nodes": 2, "gpus_per_node": 8, "tp": 2,
            "ep": 4, "sequence_parallel": True, "micro_batch": 1, "seq_len": 4096,
            "global_batch": 64, "zero": 1},
    # tp x pp x cp with a bubble
    "3d": {"model": "llama3-8b", "gpu": "h100", "nodes": 2, "gpus_per_node": 8, "tp": 2, "pp": 2,
           "cp": 2, "micro_batch": 1, "seq_len": 8192, "global_batch": 32, "zero": 1},
    "zero3": {"model": "llama3-8b", "gpu": "h100", "nodes": 2, "gpus_per_node": 8, "zero": 3,
              "micro_batch": 1, "seq_len": 4096, "global_batch": 64},
    # a tied embedding over two stages, ZeRO-2 under 32 micro-batches (earlier ones collapsed)
    "pp-tied": {"model": "gpt2-large", "gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 8,
                "pp": 2, "micro_batch": 2, "seq_len": 1024, "global_batch": 512, "zero": 2},
}


@pytest.fixture(scope="module", params=sorted(CASES))
def est(request):
    return estimate(build_scenario(CASES[request.param]), allow_oom=True)


def _total(est, kind: str) -> float:
    return sum(s.duration for s in est.timeline.spans if s.kind == kind)


def test_the_comms_lane_draws_all_the_communication_the_estimate_reports(est):
    # every collective, hidden or exposed: the estimate's total, which is also the sum of its
    # per-kind rows (time = hidden + exposed)
    assert _total(est, "comm") == pytest.approx(est.comms, rel=1e-9)
    assert est.comms == pytest.approx(sum(op.time for op in est.comm_ops), rel=1e-9)
    assert all(s.lane == "comms" for s in est.timeline.spans if s.kind == "comm")


def test_bubble_spans_are_their_own_kind_and_add_up_to_the_bubble(est):
    assert _total(est, "bubble") == pytest.approx(est.breakdown.bubble, rel=1e-9, abs=1e-15)
    assert all(s.lane == "idle" for s in est.timeline.spans if s.kind == "bubble")
    # no idle span stands for the bubble by its name any more
    assert not any("bubble" in s.name for s in est.timeline.spans if s.kind == "idle")


def test_the_last_backward_carries_the_overlap_slowdown(est):
    last = [s for s in est.timeline.spans if s.kind == "backward"][-1]
    assert last.args["overlap_slowdown_s"] == pytest.approx(est.breakdown.overlap_slowdown)
    # the timeline still ends where the step does
    assert est.timeline.step_time == pytest.approx(est.step_time, rel=1e-12)


def test_zero2_reduce_scatters_are_drawn_under_every_backward():
    # review R2: only the 89 ms exposed of about 1 s of communication used to be drawn. ZeRO-2
    # reduce-scatters each of the 4 micro-batches' gradients: 4 runs, each mostly under its
    # backward
    est = estimate(build_scenario(ZERO_PCIE))
    spans = [s for s in est.timeline.spans if s.name.startswith("ZeRO gradient reduce-scatter")]
    under = {s.name.split(", ")[1].split(" (")[0] for s in spans if "(hidden)" in s.name}
    assert under == {f"backward {k}" for k in range(1, 5)}
    rs = next(op for op in est.comm_ops if op.name == "ZeRO gradient reduce-scatter")
    assert sum(s.duration for s in spans) == pytest.approx(rs.time, rel=1e-9)
    assert sum(s.duration for s in spans if "(exposed)" in s.name) == \
        pytest.approx(rs.exposed, rel=1e-9)
    # each hidden run lies inside its backward
    backward = {s.name: s for s in est.timeline.spans if s.kind == "backward"}
    for s in spans:
        if "(hidden)" in s.name:
            b = backward[s.name.split(", ")[1].split(" (")[0]]
            assert b.start - 1e-12 <= s.start and s.end <= b.end + 1e-12


def test_collapsed_micro_batches_say_how_many_in_their_args():
    # 32 micro-batches > MAX_DRAWN_MICRO_STEPS: the first 31 are one compute span that says so;
    # their communication is still drawn pass by pass (ZeRO-2 reduce-scatters under each of
    # the 32 backwards)
    est = estimate(build_scenario(CASES["pp-tied"]))
    assert 32 > MAX_DRAWN_MICRO_STEPS
    merged = [s for s in est.timeline.spans if "micro_batches" in s.args]
    assert [(s.lane, s.args["micro_batches"]) for s in merged] == [("compute", 31)]
    block = merged[0]
    hidden = [s for s in est.timeline.spans
              if s.name.startswith("ZeRO gradient reduce-scatter, backward") and "(hidden)" in s.name]
    assert len(hidden) == 32
    assert sum(block.start <= s.start and s.end <= block.end + 1e-12 for s in hidden) == 31


def test_a_data_parallel_timeline_marks_collapsed_micro_steps_too():
    # 16 accumulation steps: micro-steps 1-15 drawn as one compute span
    est = estimate(build_scenario({"params": 2e9, "gpu": "a100-80gb", "nodes": 2,
                                   "gpus_per_node": 8, "micro_batch": 2, "grad_accum": 16,
                                   "seq_len": 2048}))
    merged = [s for s in est.timeline.spans if "micro_batches" in s.args]
    assert [(s.lane, s.args["micro_batches"]) for s in merged] == [("compute", 15)]


def test_the_trace_keeps_the_kinds_and_args(est):
    from willitscale.report.trace import chrome_trace

    events = [e for e in chrome_trace(est.timeline)["traceEvents"] if e["ph"] == "X"]
    assert len(events) == len(est.timeline.spans)
    assert sum(e["dur"] for e in events if e["cat"] == "comm") == pytest.approx(est.comms * 1e6)
    assert sum(e["dur"] for e in events if e["cat"] == "bubble") == \
        pytest.approx(est.breakdown.bubble * 1e6, abs=1e-6)
