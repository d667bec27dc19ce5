"""``estimate()`` makes the step's timeline only when an output reads it
(:class:`~willitscale.estimation.result.Deferred`): the timeline read later is the one made at
once, its JSON the same, and an estimate pickles (a sweep's worker sends it back) with it."""

import json
import pickle

import pytest

import willitscale.estimation.estimate as estimate_module
from willitscale.estimation.estimate import estimate
from willitscale.estimation.result import Deferred
from willitscale.scenario.build import build_scenario

SCENARIOS = {
    # plain data parallelism (the bucket timeline) and TP + PP + DP (the pipeline timeline)
    "dp": dict(params=2e9, gpu="a100-80gb", nodes=4, gpus_per_node=8, micro_batch=2,
               seq_len=2048, hfu=0.5),
    "tp-pp-dp": dict(model="gpt3-175b", gpu="a100-80gb", nodes=16, gpus_per_node=8, tp=8, pp=8,
                     dp=2, global_batch=64, seq_len=2048, recompute="full"),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_the_timeline_is_made_on_first_read_and_equals_one_made_at_once(name, monkeypatch):
    made = []
    real = estimate_module._timeline_with_kinds

    def counting(timeline, result):
        made.append(1)
        return real(timeline, result)

    monkeypatch.setattr(estimate_module, "_timeline_with_kinds", counting)
    est = estimate(build_scenario(SCENARIOS[name]))
    assert made == []  # nothing read it yet
    first = est.timeline
    assert made == [1] and est.timeline is first  # made once, kept
    assert len(first.spans) > 0
    # another estimate of an equal scenario, read through JSON first: the same timeline
    monkeypatch.setattr(estimate_module, "_timeline_with_kinds", real)
    again = estimate(build_scenario(SCENARIOS[name]))
    assert json.dumps(again.to_json()) == json.dumps(est.to_json())
    assert again.timeline == first


def test_an_estimate_pickles_with_its_timeline():
    est = estimate(build_scenario(SCENARIOS["tp-pp-dp"]))
    back = pickle.loads(pickle.dumps(est))
    assert isinstance(back.timeline_source, Deferred)
    assert back.timeline == est.timeline
    assert json.dumps(back.to_json()) == json.dumps(est.to_json())
