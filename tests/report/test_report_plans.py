"""The planner's best plans in figures and in the HTML report: ``plan --plot DIR`` and
``report --plan`` (automatic when the scenario leaves the parallel layout open)."""

from __future__ import annotations

import json
import re

import pytest

pytest.importorskip("matplotlib")

#: GPT-2 XL (1.56e9 parameters, catalog) on 4 nodes x 8 H100 with one 100 Gb/s NIC per node:
#: plain DDP moves 2 x 1.56e9 x 4 bytes of fp32 gradients through 12.5 GB/s per node (~1 s per
#: step, docs/estimate.md's ring formula), far more than its ~0.2 s of compute, so other
#: layouts (pipeline stages keep most traffic inside a node) must beat it
XL = ("--model", "gpt2-xl", "--gpu", "h100", "--nodes", "4", "--gpus-per-node", "8",
      "--inter-node", "100Gbps", "--seq-len", "1024", "--global-batch", "256")
PLAN = ("--model", "gpt2-xl", "--gpu", "h100", "--gpus", "32", "--gpus-per-node", "8",
        "--inter-node", "100Gbps", "--seq-len", "1024", "--global-batch", "256")


def test_plan_plot_writes_the_breakdown_and_memory_of_the_best_plans(cli, tmp_path):
    code, out, err = cli(*("plan", *PLAN, "--top", "4", "--plot", str(tmp_path)))
    assert code == 0, err
    assert "Plans" in out  # the table is still printed
    assert {p.name for p in tmp_path.iterdir()} == {"plans.png", "plans.svg", "plans-memory.png",
                                                    "plans-memory.svg"}
    svg = (tmp_path / "plans.svg").read_text()
    # four bars, each labelled with its tokens/s
    assert len(re.findall(r"tok/s", svg)) == 4


def test_plan_records_match_the_planner_and_their_flags_reproduce_them(cli):
    # the records are the planner's best plans estimated again: same throughput, same order, and
    # each record's flags given to `estimate` give that throughput again (the invariant that the
    # batched planner and estimate() agree, seen from the CLI)
    from willitscale.cli.plan import planning_settings, scenario_for
    from willitscale.plan.search import search
    from willitscale.report.plans import plan_records

    settings = {"model": "gpt2-xl", "gpu": "h100", "gpus_per_node": 8, "inter_node": "100Gbps",
                "seq_len": 1024}
    scenario = scenario_for(settings, 32)
    result = search(scenario, gpus=32, global_batch=256)
    records = plan_records(planning_settings(settings, 32), result, top=3)
    tokens = 256 * 1024
    for record, i in zip(records, result.ranked[:3]):
        assert record["tokens_per_s"] == pytest.approx(tokens / float(result.step_time[i]), rel=1e-9)
    assert [r["tokens_per_s"] for r in records] == sorted((r["tokens_per_s"] for r in records),
                                                          reverse=True)
    best = records[0]
    code, out, err = cli("estimate", *XL, *best["flags"].split(), "--json")
    assert code == 0, err
    assert json.loads(out)["tokens_per_s"] == pytest.approx(best["tokens_per_s"], rel=1e-9)
    # the breakdown's parts add up to the step (what the chart's bar length shows)
    assert sum(best["breakdown_s"].values()) == pytest.approx(best["step_time_s"], rel=1e-9)


def test_plan_label_names_what_differs_from_the_defaults():
    from willitscale.report.plans import plan_label
    from willitscale.scenario.plan import Plan

    plan = Plan(dp=4, tp=2, pp=4, zero=3, shard_scope="node", micro_batch=2, grad_accum=8,
                recompute="selective", pp_schedule="interleaved", virtual_stages=2,
                sequence_parallel=True)
    assert plan_label(plan) == "TP2 PP4 DP4 FSDP-hybrid mb2 sel il2 SP"
    assert plan_label(Plan(dp=32, micro_batch=1, grad_accum=1)) == "DP32 mb1"


def _section(page: str, anchor: str) -> str:
    start = page.index(f'<h2 id="{anchor}">')
    end = page.find("<h2", start + 4)
    return page[start:end if end > 0 else len(page)]


def test_report_adds_the_best_plans_when_the_layout_is_left_open(cli, tmp_path):
    path = tmp_path / "open.html"
    code, out, err = cli("report", *XL, "--html", str(path))
    assert code == 0, err
    page = path.read_text(encoding="utf-8")
    plans = _section(page, "plans")
    assert 'data-chart="plans"' in plans
    # the table: the plan as given, then the planner's five best, each with its flags
    assert plans.count("<tr") == 1 + 1 + 5 and plans.count("--micro-batch") == 5
    change = _section(page, "change")
    ratio = re.search(r"another parallel plan: .* gives [\d,]+ tokens/s, ([\d.]+)x this one", change)
    assert ratio and float(ratio.group(1)) > 1.0


def test_report_plans_only_when_asked_for_a_given_layout_or_a_bare_count():
    from willitscale.cli.report import wants_plans

    shaped = {"model": "gpt2-xl", "nodes": 4, "micro_batch": 2, "recompute": "full"}
    assert wants_plans(None, shaped)  # micro-batch and recomputation are not a layout
    assert not wants_plans("no", shaped)
    for layout in ({"pp": 2}, {"tp": 1}, {"zero": 1}, {"fsdp": "hybrid"}, {"dp": 32}):
        assert not wants_plans(None, {**shaped, **layout})  # a layout was given
        assert wants_plans("yes", {**shaped, **layout})
    bare = {"params": 2e9, "nodes": 2}  # no shape: only ZeRO and micro-batch to vary
    assert not wants_plans(None, bare) and wants_plans("yes", bare)


def test_report_plan_flag_adds_the_section_for_a_bare_parameter_count(cli, tmp_path):
    path = tmp_path / "bare.html"
    code, _, err = cli("report", "--params", "2e9", "--gpu", "a100-80gb", "--nodes", "2",
                       "--gpus-per-node", "8", "--micro-batch", "2", "--seq-len", "2048",
                       "--sweep", "1,2", "--plan", "--html", str(path))
    assert code == 0, err
    assert 'data-chart="plans"' in _section(path.read_text(encoding="utf-8"), "plans")


def test_a_plan_no_faster_than_the_given_one_is_not_a_change_that_flips_the_verdict():
    from types import SimpleNamespace

    from willitscale.report.contents import better_plan

    def contents(given, best):
        return SimpleNamespace(estimate=SimpleNamespace(tokens_per_s=given),
                               plans=({"label": "DP32 mb1", "tokens_per_s": best},))

    assert better_plan(contents(1000.0, 1004.0)) is None  # within 0.5%: rounding, not a change
    assert better_plan(contents(1000.0, 1100.0))["tokens_per_s"] == 1100.0
    assert better_plan(SimpleNamespace(estimate=SimpleNamespace(tokens_per_s=1.0), plans=())) is None
