"""The allocator's constants are their committed rule applied to their fit rows."""

import statistics
import tomllib
from importlib import resources

import pytest

from willitscale.memory.device import ALLOCATOR_MARGIN, RESERVED_RATIO


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
