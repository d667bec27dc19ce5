"""Invariants of the data-parallel estimate, checked on generated scenarios (hypothesis)."""

from dataclasses import replace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from willitscale.estimation.estimate import estimate
from willitscale.plan.requirements import scaled_link
from willitscale.scenario.build import build_scenario
from willitscale.step.buckets import comm_schedule

scenarios = st.fixed_dictionaries({
    "params": st.sampled_from([1e8, 1e9, 7e9, 3e10]),
    "gpu": st.sampled_from(["a100-80gb", "h100-sxm"]),
    "nodes": st.sampled_from([1, 2, 4, 16]),
    "gpus_per_node": st.sampled_from([1, 2, 8]),
    "inter_node": st.sampled_from(["100Gbps", "200Gbps", "8x400Gbps"]),
    "micro_batch": st.integers(1, 8),
    "grad_accum": st.integers(1, 4),
    "seq_len": st.sampled_from([512, 2048, 4096]),
    "hfu": st.floats(0.2, 0.7),
    "recompute": st.sampled_from(["none", "full"]),
    "grad_reduce_dtype": st.sampled_from(["fp32", "bf16"]),
    "overlap_slowdown": st.floats(0.0, 1.0),
    "bucket_cap": st.sampled_from([1 * 2**20, 25 * 2**20, 200 * 2**20]),
})


def _faster(scenario, intra: float, inter: float):
    node = scenario.cluster.node
    node = replace(node, nic=scaled_link(node.nic, inter), intra_link=scaled_link(node.intra_link, intra))
    return replace(scenario, cluster=replace(scenario.cluster, node=node))


@settings(max_examples=25, deadline=None)
@given(scenarios, st.floats(1.0, 100.0), st.floats(1.0, 100.0))
def test_more_bandwidth_never_slows_a_step(settings_, intra, inter):
    scenario = build_scenario(settings_)
    slow, fast = estimate(scenario, allow_oom=True), estimate(_faster(scenario, intra, inter), allow_oom=True)
    assert fast.step_time <= slow.step_time * (1 + 1e-9)
    assert fast.exposed_comms <= slow.exposed_comms + 1e-12
    assert fast.comms <= slow.comms * (1 + 1e-9)


@settings(max_examples=25, deadline=None)
@given(scenarios)
def test_overlapped_never_slower_than_not_overlapped(settings_):
    on = estimate(build_scenario(settings_), allow_oom=True)
    off = estimate(build_scenario({**settings_, "overlap": False}), allow_oom=True)
    assert on.step_time <= off.step_time * (1 + 1e-9)


@settings(max_examples=25, deadline=None)
@given(scenarios, st.booleans())
def test_exposed_is_between_zero_and_total(settings_, overlap):
    est = estimate(build_scenario({**settings_, "overlap": overlap}), allow_oom=True)
    assert 0 <= est.exposed_comms <= est.comms * (1 + 1e-12)
    assert abs(est.breakdown.total - est.step_time) <= 1e-12 * est.step_time
    assert 0 < est.mfu <= est.hfu <= 1


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.floats(0, 10), st.floats(0, 1)), min_size=1, max_size=40))
def test_schedule_never_starts_before_ready_nor_overlaps(pairs):
    ready = np.sort(np.array([p[0] for p in pairs]))
    duration = np.array([p[1] for p in pairs])
    start, end = comm_schedule(ready, duration)
    assert np.all(start >= ready - 1e-12)
    assert np.all(start[1:] >= end[:-1] - 1e-9)
    assert end[-1] >= duration.sum() - 1e-9
