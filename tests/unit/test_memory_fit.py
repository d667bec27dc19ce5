"""Unstated knobs are fitted; stated ones are obeyed (estimation.fit)."""

import json

import numpy as np

from willitscale.estimation.estimate import estimate
from willitscale.estimation.fit import choose, fit_scenario, knob_candidates
from willitscale.memory.activations import activation_memory
from willitscale.scenario.build import build_scenario
from willitscale.scenario.plan import Plan
from willitscale.workload import get_model

GPT3 = {"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 128, "gpus_per_node": 8, "tp": 8,
        "pp": 8, "dp": 16, "global_batch": 1536, "seq_len": 2048}


def test_choose_takes_the_fastest_that_fits_then_tight_then_the_literal():
    step = np.array([3.0, 2.0, 1.0, 1.0])
    assert choose(step, np.array([0, 0, 1, 1]), [0, 1, 1, 2]) == 1  # fits beats a faster tight
    assert choose(step, np.array([2, 2, 1, 1]), [0, 1, 1, 2]) == 2  # no fit: tight, fewest changes
    assert choose(step, np.array([2, 2, 2, 2]), [0, 1, 1, 2]) == 0  # none: the literal default
    assert choose(np.array([1.0, 1.0]), np.array([0, 0]), [0, 1]) == 0  # a tie: the literal


def test_candidates_follow_the_framework():
    # tp 8 implies Megatron: ZeRO 0 or 1 (distributed optimizer), sequence parallel off/on,
    # three recomputation modes: 2 x 2 x 3; pure data parallelism implies DDP: ZeRO 0 only
    mp = knob_candidates(Plan(tp=8, dp=16), ("zero", "sequence_parallel", "recompute"), True)
    assert len(mp) == 12 and mp[0] == Plan(tp=8, dp=16)
    assert {p.resolved_framework for p in mp} == {"megatron"}
    dp = knob_candidates(Plan(dp=16), ("zero", "sequence_parallel", "recompute"), True)
    assert len(dp) == 3 and {p.zero for p in dp} == {0}


def test_acceptance_gpt3_fits_and_names_the_knobs(cli):
    # issue 11: on main at 69473e3 this "needs 72.1 GiB ... may fill 72.0 GiB"
    args = ["estimate", "--model", "gpt3-175b", "--gpu", "a100-80gb", "--nodes", "128",
            "--gpus-per-node", "8", "--tp", "8", "--pp", "8", "--dp", "16", "--global-batch",
            "1536", "--seq-len", "2048", "--json"]
    code, out, _ = cli(*args)
    d = json.loads(out)
    assert code == 0 and d["memory"]["verdict"] == "fits"
    knobs = d["knobs"]
    assert set(knobs["knobs"]) == {"zero", "sequence_parallel", "recompute"}
    assert knobs["chosen"]["zero"] == d["plan"]["zero"]
    assert knobs["chosen"]["recompute"] == d["plan"]["recompute"]
    assert knobs["literal_default"] == {"zero": 0, "sequence_parallel": False, "recompute": "none"}
    assert "literal default" in knobs["reason"] and knobs["literal_default_memory"]["total_bytes"] > 0


def test_an_explicit_flag_is_obeyed():
    scenario = build_scenario({**GPT3, "zero": 0, "recompute": "full"})
    assert scenario.unstated == ("sequence_parallel",)
    fitted, fit = fit_scenario(scenario)
    assert fitted.plan.zero == 0 and fitted.plan.recompute == "full"
    assert set(fit.chosen) == {"sequence_parallel"}
    est = estimate(build_scenario({**GPT3, "zero": 0, "recompute": "none",
                                   "sequence_parallel": False}))
    assert est.knobs == {} and est.plan["recompute"] == "none"


def test_mingpt_layers_keep_100_sbh_under_autocast():
    # the op-by-op count of docs/memory.md: 100 s b h bytes per layer at a s / h = 2
    model = get_model("mingpt-gpt2")
    s, b, h = 128, 16, 768
    assert model.heads * s / h == 2
    act = activation_memory(model, s, b, tp=1)
    assert act.per_layer == 100 * s * b * h
