"""What-if probes evaluated as the rows of one engine pass give the answers of one run per probe.

The reference here is the way the probes were answered before (one engine run per probe on a
context whose links :func:`~willitscale.estimation.verdict.levers.scaled_context` scaled, and a
geometric bisection probing one midpoint per run), written out in this file; the code under test
puts the probes in the rows of one batch whose links take a factor per row
(:meth:`~willitscale.collectives.lines.ClusterLinks.with_plan_scale`). The two compute each
collective's cost from the same scaled inputs, so they agree to float rounding (1e-12 relative),
for NCCL's model, Gloo's rings and a calibration-free alpha-beta backend, on data-parallel and
model-parallel plans.
"""

import math

import pytest

from willitscale.estimation.estimate import estimate
from willitscale.estimation.fit import fit_scenario
from willitscale.estimation.verdict.levers import (
    EXPOSED_SHARE_LIMIT,
    available_levels,
    least_factor,
    limiting_level,
    outcome,
    probe_outcomes,
    scaled_context,
)
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.step.engine import make_context

SCENARIOS = {
    # the handbook's 2B model on 4 nodes, its 200 Gb/s cut to 25 Gb/s: DDP limited by the NICs
    "dp-nccl": dict(params=2e9, gpu="a100-80gb", nodes=4, gpus_per_node=8, inter_node="25Gbps",
                    micro_batch=2, seq_len=2048, recompute="full", hfu=0.5),
    "dp-gloo": dict(params=2e9, gpu="a100-80gb", nodes=4, gpus_per_node=8, inter_node="25Gbps",
                    micro_batch=2, seq_len=2048, hfu=0.5, collectives="gloo"),
    "dp-pcie-alpha-beta": dict(params=2e9, gpu="a100-80gb-pcie", gpus_per_node=4, nodes=2,
                               micro_batch=2, seq_len=2048, collectives="alpha-beta"),
    "tp-pp-dp": dict(model="gpt3-175b", gpu="a100-80gb", nodes=32, gpus_per_node=8, tp=8, pp=8,
                     dp=4, global_batch=256, seq_len=2048, recompute="full", inter_node="25Gbps"),
    "tp-across-nodes": dict(model="llama2-13b", gpu="a100-80gb", nodes=4, gpus_per_node=4, tp=8,
                            pp=1, dp=2, global_batch=64, seq_len=4096, recompute="full"),
}


def _setup(name):
    """The scenario's context and its plan (unstated knobs fitted, as ``estimate`` does)."""
    scenario = fit_scenario(build_scenario(SCENARIOS[name]))[0]
    return make_context(scenario), PlanBatch.from_plans([scenario.plan])


def _same(a, b):
    for field in ("step", "exposed", "tensor_exposed", "comms", "memory"):
        assert getattr(a, field) == pytest.approx(getattr(b, field), rel=1e-12, abs=1e-15), field


def _bisection_one_run_per_probe(ctx, batch, levels, *, share, lo, hi, rtol):
    """The search as it ran before: each probe its own run on a scaled context."""
    def at(factor):
        return outcome(scaled_context(ctx, **{level: factor for level in levels}), batch)

    top = at(hi)
    if top.share > share:
        return None, top
    bottom = at(lo)
    if bottom.share <= share:
        return lo, bottom
    best = top
    while hi / lo > 1 + rtol:
        mid = math.sqrt(lo * hi)
        out = at(mid)
        if out.share <= share:
            hi, best = mid, out
        else:
            lo = mid
    return hi, best


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_probes_in_one_pass_equal_one_run_each(name):
    ctx, batch = _setup(name)
    changes = [{}, {"intra": 2.0}, {"inter": 2.0}, {"intra": 0.25, "inter": 3.0},
               {"intra": 1e4, "inter": 1e4}]
    together = probe_outcomes(ctx, batch, changes)
    for change, out in zip(changes, together):
        _same(out, outcome(scaled_context(ctx, **change), batch))


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_limiting_level_and_least_factor_as_before(name):
    ctx, batch = _setup(name)
    base = outcome(ctx, batch)
    # limiting level: the level whose doubling cuts (exposed, comms) most, one run per level
    best, key = None, (base.exposed, base.comms)
    for level in available_levels(ctx):
        out = outcome(scaled_context(ctx, **{level: 2.0}), batch)
        if (out.exposed, out.comms) < key and not (
                math.isclose(out.exposed, base.exposed, rel_tol=1e-9, abs_tol=1e-12)
                and math.isclose(out.comms, base.comms, rel_tol=1e-9, abs_tol=1e-12)):
            best, key = level, (out.exposed, out.comms)
    assert limiting_level(ctx, batch, base) == best
    for levels in [(lv,) for lv in available_levels(ctx)] + [tuple(available_levels(ctx))]:
        kw = dict(share=EXPOSED_SHARE_LIMIT, lo=1e-4, hi=1e4, rtol=1e-3)
        factor, at = least_factor(ctx, batch, levels, **kw)
        ref_factor, ref_at = _bisection_one_run_per_probe(ctx, batch, levels, **kw)
        assert (factor is None) == (ref_factor is None)
        if factor is not None:
            assert factor == pytest.approx(ref_factor, rel=1e-12)
        _same(at, ref_at)


def test_the_scenarios_exercise_a_search():
    """At least one scenario's bandwidth search runs its bisection (not only the range ends)."""
    searched = 0
    for name in SCENARIOS:
        ctx, batch = _setup(name)
        for level in available_levels(ctx):
            factor, _ = least_factor(ctx, batch, (level,), share=EXPOSED_SHARE_LIMIT, lo=1e-4,
                                     hi=1e4, rtol=1e-3)
            searched += factor is not None and factor not in (1e-4, 1e4)
    assert searched >= 3


def test_estimate_verdict_probes_folded_in_its_pass_equal_separate_runs():
    """``estimate`` evaluates the limiting level's probes as rows of its own pass: the verdict
    equals the one computed with the probes run separately."""
    from willitscale.estimation.verdict.levers import limiting_level as level_of

    for name in ("dp-nccl", "tp-pp-dp", "tp-across-nodes"):
        scenario = build_scenario(SCENARIOS[name])
        est = estimate(scenario)
        ctx, batch = _setup(name)
        assert est.bottleneck.level == level_of(ctx, batch)


def test_batch_fix_variants_equal_the_plans_they_stand_for():
    """The gradient-accumulation and micro-batch fixes evaluate the plan's variants as one batch
    built from arrays; it holds what the variants built as plans would (framework included)."""
    from dataclasses import fields, replace

    import numpy as np

    from willitscale.estimation.verdict.bottleneck import _variants

    for name in ("dp-nccl", "tp-pp-dp"):
        plan = build_scenario(SCENARIOS[name]).plan
        accum = np.arange(plan.grad_accum + 1, plan.grad_accum + 40)
        for column, values, plans in (
                ("grad_accum", accum, [replace(plan, grad_accum=int(a)) for a in accum]),
                ("micro_batch", plan.micro_batch * np.arange(2, 9),
                 [replace(plan, micro_batch=plan.micro_batch * k) for k in range(2, 9)])):
            got, want = _variants(plan, **{column: values}), PlanBatch.from_plans(plans)
            for f in fields(want):
                assert np.array_equal(getattr(got, f.name), getattr(want, f.name)), f.name
                assert getattr(got, f.name).dtype == getattr(want, f.name).dtype, f.name


@pytest.mark.parametrize("collectives, backend, pairs", [
    ("nccl", "nccl", [(a, p) for a in ("Ring", "Tree") for p in ("LL", "LL128", "Simple")]),
    ("gloo", "gloo", [("Ring", "Simple")]),
    ("alpha-beta", "nccl", [("Ring", "Simple")]),
])
def test_probes_over_measured_collective_entries_equal_one_run_each(collectives, backend, pairs,
                                                                    tmp_path):
    # a calibration's [[collective]] entries (100 us + S / 5 GB/s on 2 nodes x 1 rank) time the
    # data-parallel all-reduce; a probe row's per-plan link scale must speed their bytes term
    # up as a separately scaled context does (collectives.measured_lines._matched)
    entries = "".join(
        f'[[collective]]\nbackend = "{backend}"\nop = "all_reduce"\nalgorithm = "{a}"\n'
        f'protocol = "{p}"\nnodes = 2\nranks_per_node = 1\nlatency_us = 100\nalgbw_GBps = 5\n'
        f"min_size_bytes = {2**20}\nmax_size_bytes = {2**30}\nruns = [7]\n" for a, p in pairs)
    cal = tmp_path / "cal.toml"
    cal.write_text("format = 2\n" + entries)
    sc = build_scenario({"params": 1e9, "gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 1,
                         "seq_len": 1024, "micro_batch": 4, "hfu": 0.5, "collectives": collectives,
                         "calibration": str(cal)})
    ctx = make_context(sc)
    b = PlanBatch.from_plans([sc.plan])
    changes = [{}, {"inter": 2.0}, {"inter": 0.5}, {"inter": 10.0}]
    together = probe_outcomes(ctx, b, changes)
    for change, got in zip(changes, together, strict=True):
        alone = outcome(scaled_context(ctx, **change), b)
        assert got.comms == pytest.approx(alone.comms, rel=1e-12), change
        assert got.step == pytest.approx(alone.step, rel=1e-12), change
    # a faster network makes the measured all-reduce faster (the entries' bytes term scales)
    assert together[1].comms < together[0].comms


@pytest.mark.parametrize("settings", [
    {"model": "llama2-7b", "preset": "dgx-h100", "nodes": 4, "tp": 2, "pp": 2, "dp": 8,
     "global_batch": 256, "micro_batch": 1, "seq_len": 2048},
    {"model": "gpt2-xl", "preset": "dgx-h100", "nodes": 4, "micro_batch": 4},
])
def test_probes_on_a_simulated_fabric_equal_one_run_each(settings):
    # --network flow: the rows of one pass (per-row link scales under the fabric's per-group
    # slowdown) equal a context scaled for each probe alone
    sc = build_scenario({**settings, "network": "flow", "topology": "fat-tree", "oversubscription": 4})
    ctx = make_context(sc)
    b = PlanBatch.from_plans([sc.plan])
    changes = [{}, {"inter": 2.0}, {"inter": 0.5}, {"intra": 3.0}, {"inter": 10.0, "intra": 2.0}]
    for change, got in zip(changes, probe_outcomes(ctx, b, changes), strict=True):
        alone = outcome(scaled_context(ctx, **change), b)
        assert (got.step, got.comms) == pytest.approx((alone.step, alone.comms), rel=1e-12), change
