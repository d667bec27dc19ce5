"""The allocator's constants are their committed rule applied to their fit rows."""

import statistics
import tomllib
from importlib import resources

import pytest

from willitscale.memory.device import (
    ALLOCATOR_MARGIN,
    DEEPSPEED_RESERVED_RATIO,
    RESERVED_RATIO,
    reserved_ratio,
)
from willitscale.memory.frameworks import FRAMEWORKS


def rows():
    path = resources.files("willitscale.validation") / "data" / "allocator.toml"
    return tomllib.loads(path.read_text(encoding="utf-8"))


def test_margin_is_the_largest_oom_share():
    data = rows()
    shares = [r["reserved_unallocated_GiB"] / r["allocated_GiB"] for r in data["oom"]]
    assert ALLOCATOR_MARGIN == pytest.approx(max(shares), abs=5e-5)


def test_reserved_ratio_is_the_median_of_the_training_logs():
    data = rows()
    ratios = [r["max_reserved_GB"] / r["max_allocated_GB"] for r in data["peak"]]
    assert RESERVED_RATIO == pytest.approx(statistics.median(ratios))
    assert all(r["source"] and r["quote"] for r in data["oom"] + data["peak"])


def deepspeed_runs():
    path = resources.files("willitscale.validation") / "data" / "deepspeed_reserve.toml"
    return tomllib.loads(path.read_text(encoding="utf-8"))["run"]


def run_median_ratio(run):
    """The median max reserved / max allocated over a run's report_memory lines (the rule)."""
    return statistics.median(line["max_reserved_MiB"] / line["max_allocated_MiB"]
                             for line in run["lines"])


def test_each_deepspeed_run_ratio_is_the_median_of_its_lines():
    # the rule takes lines printed after >= 1 optimizer step only
    runs = deepspeed_runs()
    assert all(line["after_iterations"] >= 1 for run in runs for line in run["lines"])
    # the typed 4-place summaries are the raw lines' medians (1.1679, 1.1539)
    assert [round(run_median_ratio(run), 4) for run in runs] == [r["median_ratio"] for r in runs]


def test_deepspeed_reserve_is_the_median_of_its_runs():
    # deepspeed_reserve.toml: one row per run (log file), each its lines' median, recomputed
    # from the committed lines; the constant is stored to 4 places
    runs = deepspeed_runs()
    ratios = [run_median_ratio(run) for run in runs]
    assert DEEPSPEED_RESERVED_RATIO == round(statistics.median(ratios), 4)
    assert all(r["source"] and r["quote"] and "DeepSpeed" in r["engine"] for r in runs)


def test_the_reserve_is_chosen_per_framework_and_stage():
    ds, fsdp = FRAMEWORKS.index("deepspeed"), FRAMEWORKS.index("fsdp")
    got = reserved_ratio([ds, ds, ds, fsdp], [0, 2, 3, 3])
    # DeepSpeed's engine at ZeRO 0-2 has its own fit; its ZeRO-3 and FSDP keep the FSDP rows'
    assert list(got) == [DEEPSPEED_RESERVED_RATIO, DEEPSPEED_RESERVED_RATIO, RESERVED_RATIO,
                         RESERVED_RATIO]
