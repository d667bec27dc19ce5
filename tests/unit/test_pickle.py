"""Every public object pickles with the standard library and comes back equal.

A process pool (the fabric sweep, a parallel planner) sends scenarios and clusters to workers and
estimates and errors back; a notebook caches them. ``FACTORIES`` builds one instance of every
public dataclass in ``willitscale.__all__`` and a test fails when a new public dataclass has no
factory here, so none is forgotten. Equality is checked field by field, recursively (numpy
arrays element by element, NaN equal to NaN), not with ``==`` (arrays make ``==`` ambiguous).
"""

from __future__ import annotations

import dataclasses
import enum
import math
import pickle
from collections.abc import Mapping

import numpy as np
import pytest

import willitscale as wis
from willitscale.config import FrozenMap
from willitscale.scenario.build import build_scenario

SETTINGS = {"model": "llama3-8b", "gpu": "h100", "nodes": 2, "gpus_per_node": 8, "seq_len": 4096,
            "micro_batch": 1, "tp": 2, "pp": 2}
SMALL = {"model": "gpt2-xl", "preset": "dgx-h100", "nodes": 1, "micro_batch": 1}


def _scenario():
    return build_scenario(SETTINGS)


def _estimate():
    return wis.estimate(_scenario(), allow_oom=True)


def _search():
    from willitscale.plan.search import SearchSpace, search
    return search(build_scenario(SMALL), gpus=8, global_batch=16,
                  space=SearchSpace(tp=(1, 2), pp=(1,), cp=(1,)))


def _hierarchy():
    return wis.Hierarchy(ranks_per_node=8, intra=wis.LinkCost(bandwidth=450e9, latency=1e-6),
                         inter=wis.LinkCost(bandwidth=50e9, latency=5e-6))


def _traffic():
    topo = wis.build_topology("rail-optimized", nodes=2, gpus_per_node=4)
    return wis.step_traffic(topo, wis.ParallelLayout(tp=4, dp=2), wis.StepComm(dp_bytes=1e8))


def _chart():
    from willitscale.report.plots.base import new_figure
    fig, _ = new_figure()
    return wis.Chart(name="c", title="a chart", figure=fig, caption="caption")


def _calibration():
    link = wis.LinkCalibration(level="inter_node", bandwidth=40e9, latency=5e-6, runs=(1, 2))
    comp = wis.ComputeCalibration(device="h100", dtype="bf16", peak_flop_rate=989e12)
    return wis.Calibration(links=(link,), compute=(comp,), created="2026-01-01", runs=(1, 2))


FACTORIES = {
    "ActivationMemory": lambda: wis.activation_memory(wis.get_model("llama3-8b"), 4096, 1, tp=2),
    "BatchResult": lambda: wis.evaluate_plans(
        _scenario(), wis.PlanBatch.from_plans([_scenario().plan]), detail=True),
    "Calibration": _calibration,
    "Catalog": wis.load_catalog,
    "Chart": _chart,
    "Choice": lambda: wis.fastest("all_reduce", 1e8, 16, _hierarchy()),
    "Cluster": lambda: wis.build_cluster(preset="dgx-h100", nodes=2),
    "CollectiveCall": lambda: wis.CollectiveCall(op=wis.Op.ALL_REDUCE, size=1e6, groups=((0, 1),)),
    "CollectiveCost": lambda: wis.collective_cost("all_reduce", "ring", 1e8, 16, _hierarchy()),
    "ComputeCalibration": lambda: _calibration().compute[0],
    "DataLoading": lambda: wis.DataLoading(sample_bytes=1e6, storage_bandwidth=2e9),
    "DdpOptions": lambda: _scenario().ddp,
    "Efficiency": lambda: wis.Efficiency(kind="mfu", value=0.4, source="a guess"),
    "FabricLinks": wis.FabricLinks,
    "Gpu": lambda: wis.get_gpu("h100"),
    "GroupPlacement": lambda: wis.group_placement("tp", {"tp": 4, "cp": 1, "ep": 1, "dp": 4, "pp": 1}, 8),
    "Hierarchy": _hierarchy,
    "LayerFlops": lambda: wis.layer_forward_flops(wis.get_model("llama3-8b"), 4096),
    "Link": lambda: wis.get_link("nvlink4"),
    "LinkCalibration": lambda: _calibration().links[0],
    "LinkCost": lambda: _hierarchy().inter,
    "LinkRace": lambda: wis.lecture_case(wis.get_node("dgx-h100")),
    "Measured": lambda: _scenario().measured,
    "ModelSummary": lambda: wis.summarize_model(wis.get_model("llama3-8b")),
    "Node": lambda: wis.get_node("dgx-h100"),
    "ParallelLayout": lambda: wis.ParallelLayout(tp=4, dp=2),
    "ParallelOptions": wis.ParallelOptions,
    "ParamCount": lambda: wis.param_count(wis.get_model("llama3-8b")),
    "Plan": lambda: _scenario().plan,
    "PlanBatch": lambda: _search().batch,
    "PublishedRun": lambda: __import__("willitscale.validation.published",
                                       fromlist=["x"]).PUBLISHED_RUNS[0],
    "ReportContents": lambda: wis.build_contents(SMALL),
    "Routing": lambda: wis.parse_routing("spray", seed=3),
    "Scenario": _scenario,
    "SearchResult": _search,
    "SearchSpace": lambda: __import__("willitscale.plan.search", fromlist=["x"]).SearchSpace(tp=(1, 2)),
    "Span": lambda: _estimate().timeline.spans[0],
    "StateConvention": lambda: wis.get_convention("zero-16"),
    "StateMemory": lambda: wis.state_memory(8e9, "zero-16", 1, 8),
    "StepComm": lambda: wis.StepComm(dp_bytes=1e8, tp_bytes=1e6, tp_count=4),
    "StepEstimate": _estimate,
    "Switch": lambda: next(iter(wis.load_catalog().switches.values())),
    "Timeline": lambda: _estimate().timeline,
    "Topology": lambda: wis.build_topology("fat-tree", k=4, gpus_per_node=4, oversubscription=2),
    "Traffic": _traffic,
    "TrainingFlops": lambda: wis.training_flops(wis.get_model("llama3-8b"), 4096),
    "Transformer": lambda: wis.get_model("llama3-8b"),
}


def same(a, b, path="obj") -> None:
    """Assert ``a`` and ``b`` hold the same values, recursively; the path names a difference."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} != {type(b).__name__}"
    if dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, path
        assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), path
        assert a.flags.writeable == b.flags.writeable, f"{path}: read-only flag lost"
    elif isinstance(a, Mapping):
        assert list(a) == list(b), path
        for k in a:
            same(a[k], b[k], f"{path}[{k!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    elif isinstance(a, float) and math.isnan(a):
        assert math.isnan(b), path
    elif type(a).__module__.startswith("matplotlib"):
        assert type(a) is type(b)  # a figure: its own pickling; the type is what we can check
    elif hasattr(a, "__slots__") or hasattr(a, "__dict__") and not isinstance(a, (str, enum.Enum)):
        state_a = getattr(a, "__dict__", None) or {s: getattr(a, s) for s in a.__slots__}
        state_b = getattr(b, "__dict__", None) or {s: getattr(b, s) for s in b.__slots__}
        same(state_a, state_b, path)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def public_dataclasses() -> list[str]:
    return [n for n in wis.__all__ if isinstance(getattr(wis, n), type)
            and dataclasses.is_dataclass(getattr(wis, n))]


def test_every_public_dataclass_has_a_factory():
    assert sorted(public_dataclasses()) == sorted(FACTORIES)


@pytest.mark.parametrize("name", sorted(FACTORIES))
def test_public_dataclass_round_trips_through_pickle(name):
    obj = FACTORIES[name]()
    assert type(obj) is getattr(wis, name)
    back = pickle.loads(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL))
    same(obj, back)


def test_estimate_is_equal_after_pickle_and_still_frozen():
    est = _estimate()
    back = pickle.loads(pickle.dumps(est))
    assert back == est and back.step_time == est.step_time
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.step_time = 1.0


def test_frozen_map_reads_like_a_dict_and_cannot_change():
    m = FrozenMap({"a": 1, "b": 2})
    assert m == {"a": 1, "b": 2} and m["b"] == 2 and list(m) == ["a", "b"] and "a" in m
    assert m | {"c": 3} == {"a": 1, "b": 2, "c": 3} and m.copy() == {"a": 1, "b": 2}
    with pytest.raises(TypeError):
        m["a"] = 5  # type: ignore[index]
    assert pickle.loads(pickle.dumps(m)) == m


ERRORS = {
    "ConfigError": lambda: wis.ConfigError("tp", 3, "a divisor of 8"),
    "UnknownNameError": lambda: wis.UnknownNameError("gpu", "h1000", ["h100", "a100"]),
    "Infeasible": lambda: wis.Infeasible("batch_not_divisible", "64 % 48 != 0"),
    "OutOfMemory": lambda: wis.OutOfMemory("needs 90 GB of 80", memory=None),
    "BenchmarkError": lambda: wis.BenchmarkError("rank 1 died"),
    "MissingDependency": lambda: wis.MissingDependency("torch", "bench", "benchmarking"),
    "NotApplicable": lambda: wis.NotApplicable(wis.Op.ALL_REDUCE, wis.Algorithm("binary_tree"), "no"),
    "WillItScaleError": lambda: wis.WillItScaleError("plain"),
}


def test_every_public_error_has_a_case():
    errors = [n for n in wis.__all__ if isinstance(getattr(wis, n), type)
              and issubclass(getattr(wis, n), BaseException)]
    assert sorted(errors) == sorted(ERRORS)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_cross_a_process_boundary_with_message_and_fields(name):
    # The default pickling of an exception calls cls(*args) with the message alone, which fails
    # for the errors whose constructor takes (field, value, expected) or (kind, name, known).
    err = ERRORS[name]()
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is type(err) and str(back) == str(err)
    assert vars(back) == vars(err) and back.exit_code == err.exit_code
