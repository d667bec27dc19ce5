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


def test_deepspeed_reserve_is_the_median_of_its_runs():
    # deepspeed_reserve.toml: one row per run (log file), each its lines' median
    path = resources.files("willitscale.validation") / "data" / "deepspeed_reserve.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    ratios = [r["median_ratio"] for r in data["run"]]
    assert DEEPSPEED_RESERVED_RATIO == pytest.approx(statistics.median(ratios))
    assert all(r["source"] and r["quote"] and "DeepSpeed" in r["engine"] for r in data["run"])


def test_the_reserve_is_chosen_per_framework_and_stage():
    ds, fsdp = FRAMEWORKS.index("deepspeed"), FRAMEWORKS.index("fsdp")
    got = reserved_ratio([ds, ds, ds, fsdp], [0, 2, 3, 3])
    # DeepSpeed's engine at ZeRO 0-2 has its own fit; its ZeRO-3 and FSDP keep the FSDP rows'
    assert list(got) == [DEEPSPEED_RESERVED_RATIO, DEEPSPEED_RESERVED_RATIO, RESERVED_RATIO,
                         RESERVED_RATIO]
