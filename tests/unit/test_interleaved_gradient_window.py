"""The window a stage's gradient buckets hide behind (step.tail.sync_window): one micro-batch's
backward with 1F1B, min(m, p) with the interleaved schedule (each model chunk syncs at its last
micro-batch of the last group of p; Megatron-LM schedules.py)."""

from types import SimpleNamespace

import numpy as np

from willitscale.estimation.estimate import estimate
from willitscale.scenario.batch import PlanBatch
from willitscale.scenario.build import build_scenario
from willitscale.step.tail import sync_window

GPT3 = {"model": "gpt3-175b", "gpu": "h100-sxm", "nodes": 192, "gpus_per_node": 8, "tp": 4,
        "pp": 8, "zero": 1, "recompute": "none", "sequence_parallel": True, "micro_batch": 1,
        "dtype": "fp8", "seq_len": 2048}


def _window(settings):
    plan = build_scenario(settings).plan
    b = PlanBatch.from_plans([plan])
    return float(sync_window(b, SimpleNamespace(m=b.grad_accum.astype(float)))[0])


def test_one_backward_with_1f1b_and_min_m_p_interleaved():
    # dp = 1536 / 32 = 48; global batch 384 -> m = 8 = p; 768 -> m = 16 > p = 8
    assert _window({**GPT3, "global_batch": 384}) == 1.0
    inter = {**GPT3, "pp_schedule": "interleaved", "virtual_stages": 4}
    assert _window({**inter, "global_batch": 384}) == 8.0
    assert _window({**inter, "global_batch": 768}) == 8.0


def test_the_interleaved_window_hides_more_of_the_gradient_sync(monkeypatch):
    # the same interleaved plan (m = p = 8, v = 4): with each chunk syncing while later chunks
    # still run their last group's backward, less of the reduce-scatter is exposed than if the
    # buckets could only hide behind one micro-batch's backward (the window forced to 1)
    import willitscale.step.tail as tail

    settings = {**GPT3, "global_batch": 384, "pp_schedule": "interleaved", "virtual_stages": 4}
    exposed = lambda e: sum(op["exposed_s"] for op in e.to_json()["comm_ops"]  # noqa: E731
                            if op["name"] == "ZeRO gradient reduce-scatter")
    window = exposed(estimate(build_scenario(settings), allow_oom=True))
    monkeypatch.setattr(tail, "sync_window", lambda b, st: np.ones(len(b.pp)))
    one = exposed(estimate(build_scenario(settings), allow_oom=True))
    assert window < 0.5 * one
