"""The estimate's computed fixes, made in fewer engine passes, give the answers of the passes
they replace.

* the bf16-gradient fix runs on :func:`~willitscale.step.engine.with_ddp` of the estimate's
  context (only the fields made from the DDP settings made again) where it built a fresh context
  of the changed scenario: the engine's answer must be the same to the last bit;
* the gradient-accumulation and micro-batch variants run as the rows of one batch where they
  ran as two: each row must equal the run of its own set.
"""

from dataclasses import replace

import numpy as np
import pytest

from willitscale.estimation.fit import fit_scenario
from willitscale.estimation.verdict.bottleneck import _joined, _variants
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.step.engine import make_context, new_context, with_ddp
from willitscale.step.evaluate import run

SCENARIOS = {
    # the handbook's 2B model on 4 nodes at 25 Gb/s, gradients reduced in fp32: DDP, NIC-bound
    "dp": dict(params=2e9, gpu="a100-80gb", nodes=4, gpus_per_node=8, inter_node="25Gbps",
               micro_batch=2, seq_len=2048, recompute="full", hfu=0.5, grad_reduce_dtype="fp32"),
    # issue 14's acceptance plan on an oversubscribed simulated fabric (ZeRO-1 fitted)
    "tp-pp-dp-flow": dict(model="gpt3-175b", gpu="a100-80gb", nodes=128, gpus_per_node=8, tp=8,
                          pp=8, dp=16, global_batch=1536, seq_len=2048, recompute="full",
                          grad_reduce_dtype="fp32", network="flow", topology="fat-tree",
                          oversubscription=4),
    "moe-zero3": dict(model="mixtral-8x7b", gpu="h100-sxm", nodes=2, gpus_per_node=8, ep=8,
                      dp=16, zero=3, global_batch=64, seq_len=4096, recompute="full"),
}

_FIELDS = ("step_time", "exposed_comms", "comms", "memory_per_gpu", "bubble", "optimizer")


def _fitted(name):
    return fit_scenario(build_scenario(SCENARIOS[name]))[0]


@pytest.mark.parametrize("name", sorted(SCENARIOS))
@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
def test_with_ddp_equals_a_fresh_context(name, dtype):
    scenario = _fitted(name)
    other = replace(scenario, ddp=replace(scenario.ddp, grad_reduce_dtype=dtype))
    batch = PlanBatch.from_plans([other.plan])
    ctx = make_context(scenario)
    run(ctx, batch, detail=True)  # the memo holds the original scenario's parts first
    got = run(with_ddp(ctx, other), batch, detail=True)
    want = run(new_context(other), batch, detail=True)
    for field in _FIELDS:
        assert np.array_equal(np.asarray(getattr(got, field)), np.asarray(getattr(want, field))), field
    assert got.detail.tail.schedule.keys() == want.detail.tail.schedule.keys()


def test_with_ddp_refuses_another_scenario():
    a, b = _fitted("dp"), _fitted("moe-zero3")
    with pytest.raises(ValueError, match="DDP"):
        with_ddp(make_context(a), b)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_joined_variants_equal_their_own_runs(name):
    scenario = _fitted(name)
    plan, ctx = scenario.plan, make_context(scenario)
    accum = _variants(plan, grad_accum=np.arange(plan.grad_accum + 1, plan.grad_accum + 300))
    micro = _variants(plan, micro_batch=plan.micro_batch * np.arange(2, 20))
    together = run(ctx, _joined(accum, micro))
    n = len(accum)
    for part, rows in ((accum, slice(0, n)), (micro, slice(n, None))):
        alone = run(ctx, part)
        for field in _FIELDS:
            assert np.array_equal(np.asarray(getattr(together, field))[rows],
                                  np.asarray(getattr(alone, field))), field


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_variants_of_one_geometry_placed_once_equal_a_mixed_batch(name):
    """A batch whose plans all share the first's geometry is placed and costed for that plan
    once (``evaluate._places_and_lines``); joined with a plan of another geometry the same rows
    are placed and costed each on its own: the answers must be identical."""
    scenario = _fitted(name)
    plan, ctx = scenario.plan, make_context(scenario)
    variants = _joined(_variants(plan, grad_accum=np.arange(plan.grad_accum + 1, plan.grad_accum + 60)),
                       _variants(plan, micro_batch=plan.micro_batch * np.arange(2, 12)))
    other = PlanBatch.from_plans([replace(plan, dp=plan.dp // 2, pp=plan.pp * 2)
                                  if plan.dp % 2 == 0 and plan.pp * 2 <= 64 else plan])
    assert (other.pp[0], other.dp[0]) != (plan.pp, plan.dp)
    alone = run(ctx, variants)
    mixed = run(ctx, _joined(variants, other))
    n = len(variants)
    for field in _FIELDS:
        assert np.array_equal(np.asarray(getattr(mixed, field))[:n],
                              np.asarray(getattr(alone, field))), field


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_variants_equal_each_plan_run_alone(name):
    """Rows that share their bucket tail's inputs (more gradient accumulation leaves the last
    backward as it is) are timed once (``tail._distinct_rows``): each row must still equal its
    plan run as a batch of one."""
    scenario = _fitted(name)
    plan, ctx = scenario.plan, make_context(scenario)
    variants = _joined(_variants(plan, grad_accum=np.arange(plan.grad_accum + 1, plan.grad_accum + 200)),
                       _variants(plan, micro_batch=plan.micro_batch * np.arange(2, 12)))
    together = run(ctx, variants)
    for i in (0, 1, 57, 198, 199, 200, len(variants) - 1):
        alone = run(ctx, variants.take(np.array([i])))
        for field in _FIELDS:
            assert np.asarray(getattr(together, field))[i] == np.asarray(getattr(alone, field))[0], (i, field)


@pytest.mark.parametrize("name", ["dp", "tp-pp-dp-flow"])
def test_a_repeated_estimate_equals_the_first_and_one_with_nothing_kept(name, monkeypatch):
    """A second ``estimate()`` of one scenario reuses what the first kept (its fitted scenario
    object, the bf16 variant's context, the flow backend's lines): the same JSON, byte for
    byte, as the first and as an estimate of an equal scenario with nothing kept."""
    import json

    import willitscale.step.engine as engine
    from willitscale.estimation.estimate import estimate

    scenario = build_scenario(SCENARIOS[name])
    first = json.dumps(estimate(scenario).to_json())
    assert "exposed then" in first  # the network is the bottleneck: the fixes were computed
    assert json.dumps(estimate(scenario).to_json()) == first
    monkeypatch.setattr(engine, "MEMO_PLANS", 0)
    assert json.dumps(estimate(build_scenario(SCENARIOS[name])).to_json()) == first


@pytest.mark.parametrize("name", ["dp", "tp-pp-dp-flow"])
def test_bandwidth_search_with_the_plan_known_above_the_limit(name, monkeypatch):
    """``needed_bandwidth(base=...)``: the plan's own share (above the limit) decides the
    bisection's first midpoint (factor 1 of [1e-4, 1e4]) without a probe. The factor and the
    outcome are those of the search that probes it, and the 15 levels to 0.1% take 2 engine
    passes instead of 3."""
    from willitscale.estimation.verdict import levers

    scenario = _fitted(name)
    ctx, batch = make_context(scenario), PlanBatch.from_plans([scenario.plan])
    base = levers.outcome(ctx, batch)
    assert base.share > levers.EXPOSED_SHARE_LIMIT
    passes = []
    real = levers.probe_outcomes

    def counted(*args, **kw):
        passes.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(levers, "probe_outcomes", counted)
    want = levers.needed_bandwidth(ctx, batch, "inter")
    probing = len(passes)
    passes.clear()
    got = levers.needed_bandwidth(ctx, batch, "inter", base=base)
    assert got.factor is not None and got.factor == want.factor
    assert (got.at.step, got.at.exposed, got.at.comms) == (want.at.step, want.at.exposed,
                                                            want.at.comms)
    assert (probing, len(passes)) == (3, 2)
