"""Notebook hygiene: short reprs, HTML tables, DataFrames of results.

Every public object's ``repr`` fits in a few lines (a ``StepEstimate`` repr was 9.5 kB, a
``Catalog``'s 150 kB, a report's 365 kB); the numbers a repr shows are the object's own,
formatted (checked against the fields here, not against a stored string).
"""

from __future__ import annotations

import builtins
import math

import numpy as np
import pytest
from test_pickle import FACTORIES, SMALL, _estimate, _search

import willitscale as wis
from willitscale.plan.scaling import scaling_rows
from willitscale.scenario.plan import Plan
from willitscale.units import format_time

#: a repr longer than this is not "short": about five 100-column lines
MAX_REPR = 500


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_every_public_object_has_a_short_repr_naming_its_class(name):
    text = repr(FACTORIES[name]())
    assert text.startswith(name + "("), text[:80]
    assert len(text) <= MAX_REPR, f"{name}: {len(text)} characters: {text[:200]}..."


@pytest.mark.parametrize("plan", [Plan(), Plan(dp=4, tp=2, pp=2),
                                  Plan(dp=2, pp=4, pp_schedule="interleaved", virtual_stages=2,
                                       zero=1, shard_scope="node", recompute="full")])
def test_plan_repr_shows_what_differs_from_defaults_and_evaluates_back(plan):
    text = repr(plan)
    assert eval(text, {"Plan": Plan}) == plan  # noqa: S307 - our own repr
    assert "grad_accum" not in text and "dp=" in text


def test_estimate_repr_and_html_show_its_own_numbers():
    est = _estimate()
    text = repr(est)
    assert format_time(est.step_time) in text and f"MFU {est.mfu:.1%}" in text
    assert f"on {est.gpus} GPUs" in text and est.bottleneck.resource in text
    html = est._repr_html_()
    assert html.startswith("<table>") and html.count("<tr>") >= 7
    assert f"<td>{format_time(est.step_time)}</td>" in html
    # the step's parts that are not zero each get a row, with their own time
    assert f"<td>{format_time(est.breakdown.forward)}</td>" in html


def test_html_tables_escape_their_cells():
    from willitscale.estimation.display import html_table

    html = html_table("a <b>", ("x",), [("<script>&",)])
    assert "<script>" not in html and "&lt;script&gt;&amp;" in html and "a &lt;b&gt;" in html


def test_search_result_repr_counts_match_the_result():
    result = _search()
    text = repr(result)
    assert f"{result.evaluated} plans, {result.ranked.size} feasible" in text
    for reason, count in result.rejected().items():
        assert f"{reason} {count}" in text
    assert repr(result.batch.plan(int(result.ranked[0]))) in text
    assert result._repr_html_().count("<tr>") == 1 + min(10, result.ranked.size)


def test_search_result_to_frame_is_the_ranked_plans():
    pd = pytest.importorskip("pandas")
    result = _search()
    frame = result.to_frame()
    assert isinstance(frame, pd.DataFrame) and len(frame) == result.ranked.size
    np.testing.assert_array_equal(frame["step_time_s"], result.step_time[result.ranked])
    assert frame["step_time_s"].is_monotonic_increasing and (frame["reason"] == "").all()
    # MFU = model FLOP/s per GPU over the GPU's dense bf16 peak
    peak = wis.get_gpu("h100").peak("bf16")
    np.testing.assert_allclose(frame["mfu"], result.tflops[result.ranked] * 1e12 / peak)
    everything = result.to_frame(feasible_only=False)
    assert len(everything) == result.evaluated
    counts = everything["reason"][everything["reason"] != ""].value_counts().to_dict()
    assert counts == result.rejected()
    assert len(result.to_frame(top=3)) == min(3, result.ranked.size)


def test_to_frame_of_a_sweep_and_of_estimates():
    pytest.importorskip("pandas")
    rows = scaling_rows(SMALL, [1, 2, 4])
    frame = wis.to_frame(rows)
    assert list(frame["nodes"]) == [1, 2, 4] and list(frame["gpus"]) == [8, 16, 32]
    np.testing.assert_array_equal(frame["step_time_s"], [r.step_time for r in rows])
    est = _estimate()
    one = wis.to_frame([est])
    assert one.loc[0, "step_time_s"] == est.step_time and one.loc[0, "plan"]["tp"] == 2
    with pytest.raises(wis.ConfigError, match="SearchResult, a list of ScalingRow"):
        wis.to_frame(42)


def test_to_frame_without_pandas_says_which_extra_installs_it(monkeypatch):
    real_import = builtins.__import__

    def no_pandas(name, *args, **kwargs):
        if name == "pandas" or name.startswith("pandas."):
            raise ImportError("No module named 'pandas'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pandas)
    with pytest.raises(wis.MissingDependency, match=r"pip install 'willitscale\[frame\]'"):
        _search().to_frame()


def test_repr_of_a_nan_free_batch_result_names_the_plan_count():
    result = FACTORIES["BatchResult"]()
    step = float(np.asarray(result.step_time)[0])
    assert repr(result) == f"BatchResult(1 plan: step {step:.4g} s)" and math.isfinite(step)
