"""``benchmarks/run.py``: which scripts it runs, how a goal is judged, and the hand-off of headline
figures from a script's own process (no speed is asserted here: speed goals are not tests)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load(name: str):
    """A benchmarks/ module under a name that cannot clash with another ``run``."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"benchmarks_{name.strip('_')}", BENCH / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


RUNNER = _load("run")  # puts benchmarks/ on sys.path for its helper, as running it does
Headline = RUNNER.Headline
benchmarks = RUNNER.benchmarks


def test_every_script_but_the_runner_and_helpers_is_a_benchmark():
    names = benchmarks()
    assert {"planner_speed", "fabric_scaling"} <= set(names)
    assert "run" not in names and not any(n.startswith("_") for n in names)
    # the SimGrid worker is a test helper now, not something the runner would try to run
    assert "fabric_simgrid" not in names
    assert (BENCH.parent / "tests" / "parity" / "simgrid_worker.py").exists()


def test_a_goal_is_met_or_missed_on_the_right_side():
    assert Headline("plans", 150_000, "plans/s", at_least=100_000).met is True
    assert Headline("plans", 99_999, "plans/s", at_least=100_000).met is False
    assert Headline("wall", 2.0, "s", at_most=2.0).met is False  # "under 2 s" is strict
    assert Headline("ratio", 300, "x").met is None
    assert Headline("plans", 150_000, "plans/s", at_least=100_000).text() == \
        "plans: 150,000 plans/s  [goal met: >= 100,000 plans/s]"


@pytest.mark.slow  # runs one real benchmark (about a second) in its own interpreter
def test_the_runner_collects_a_scripts_headlines_from_its_own_process():
    proc = subprocess.run([sys.executable, str(BENCH / "run.py"), "workload_vectorized", "--json"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)["workload_vectorized"]
    assert result["error"] is None and result["seconds"] > 0
    names = [h["name"] for h in result["headlines"]]
    assert names == ["workload (FLOPs, activations, state) batched", "batched vs one plan at a time"]
    assert all(h["value"] > 0 for h in result["headlines"])
