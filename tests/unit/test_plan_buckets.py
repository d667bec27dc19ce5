"""The DDP bucket assignment and the all-reduce schedule, on cases worked by hand."""

import numpy as np
import pytest

from willitscale.step.buckets import (
    DEFAULT_BUCKET_CAP_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    MIB,
    assign_buckets,
    bucket_totals,
    comm_schedule,
    exposed_after,
    last_end,
    uniform_buckets,
)


def test_pytorch_defaults_are_mebibytes():
    # reducer.hpp: kDefaultFirstBucketBytes = int(1024 * 1024); kDefaultBucketBytesCap =
    # int(25 * 1024 * 1024); distributed.py: bucket_bytes_cap = int(bucket_cap_mb * 1024 * 1024)
    assert DEFAULT_FIRST_BUCKET_BYTES == 1_048_576
    assert DEFAULT_BUCKET_CAP_BYTES == 26_214_400


def test_assignment_closes_a_bucket_once_it_reaches_its_cap():
    # caps 10 (first) then 20. Tensors 4, 4 -> 8 < 10 keeps going; +4 = 12 >= 10 closes bucket 0.
    # Bucket 1: 15 < 20, +15 = 30 >= 20 closes. Bucket 2: 50 alone >= 20 closes. Bucket 3: 1.
    index = assign_buckets([4, 4, 4, 15, 15, 50, 1], first_cap=10, cap=20)
    assert index.tolist() == [0, 0, 0, 1, 1, 2, 3]


def test_bucket_totals_sum_sizes_and_take_the_last_ready_time():
    sizes, ready = bucket_totals([4, 4, 4, 15], [0.1, 0.2, 0.3, 0.4], [0, 0, 0, 1])
    assert sizes.tolist() == [12, 15]
    assert ready.tolist() == [0.3, 0.4]


def test_uniform_buckets_first_then_caps_then_remainder():
    sizes, frac = uniform_buckets(100 * MIB, first_cap=1 * MIB, cap=25 * MIB)
    # 100 MiB = 1 + 25 + 25 + 25 + 24
    assert (sizes / MIB).tolist() == [1, 25, 25, 25, 24]
    assert frac.tolist() == pytest.approx([0.01, 0.26, 0.51, 0.76, 1.0])


def test_schedule_matches_the_recurrence_by_hand():
    # ready 0, 1, 1.5; durations 2, 1, 1:
    # bucket 0: start 0, end 2; bucket 1: start max(1, 2) = 2, end 3; bucket 2: start 3, end 4.
    start, end = comm_schedule([0, 1, 1.5], [2, 1, 1])
    assert start.tolist() == [0, 2, 3] and end.tolist() == [2, 3, 4]
    # ready 0, 5: the stream idles in between: bucket 1 starts at 5.
    start, end = comm_schedule([0, 5], [1, 1])
    assert start.tolist() == [0, 5] and end.tolist() == [1, 6]


def test_schedule_broadcasts_over_many_plans_at_once():
    rng = np.random.default_rng(0)
    ready = np.sort(rng.uniform(0, 1, size=(50, 30)), axis=1)
    duration = rng.uniform(0, 0.1, size=(50, 30))
    start, end = comm_schedule(ready, duration)
    for row in range(50):  # against the plain loop
        t = 0.0
        for i in range(30):
            s = max(ready[row, i], t)
            t = s + duration[row, i]
            assert start[row, i] == pytest.approx(s) and end[row, i] == pytest.approx(t)


def test_exposed_is_what_runs_past_the_end_of_compute():
    assert exposed_after(4.0, 3.0) == 1.0
    assert exposed_after(2.0, 3.0) == 0.0


def test_last_end_equals_the_schedules_last_end():
    rng = np.random.default_rng(1)
    ready = np.sort(rng.uniform(0, 1, size=(20, 15)), axis=1)
    duration = rng.uniform(0, 0.2, size=(20, 15))
    _, end = comm_schedule(ready, duration)
    assert last_end(ready, duration) == pytest.approx(end[:, -1])
    # by hand: ready 0, 1, 1.5 with durations 2, 1, 1 ends at 4 (see the schedule test)
    assert last_end([0, 1, 1.5], [2, 1, 1]) == 4


def test_overlap_slowdown_stretch_is_the_exact_fixed_point():
    # bucket_tail's stretch x must satisfy x = s (total - exposed(x)): rerun the schedule at x
    # and check, for random layouts; the closed form replaced 6 fixed-point iterations
    from willitscale.step.buckets import last_end
    from willitscale.step.data import _fixed_stretch

    rng = np.random.default_rng(7)
    for _ in range(200):
        n = int(rng.integers(1, 12))
        duration = rng.exponential(1.0, (3, n)) * rng.choice([0.01, 1.0, 100.0])
        fraction = np.sort(rng.uniform(0.0, 1.0, (1, n)), axis=-1)
        fraction[:, -1] = 1.0
        backward, total = rng.uniform(0.1, 50.0, 3), duration.sum(axis=-1)
        s = float(rng.choice([0.05, 0.19, 0.5, 1.0]))
        suffix = np.flip(np.cumsum(np.flip(duration, axis=-1), axis=-1), axis=-1)
        x = _fixed_stretch(backward, fraction, suffix, total, s)
        end = backward + x
        exposed = np.clip(last_end(fraction * end[:, None], duration) - end, 0.0, total)
        assert x == pytest.approx(s * (total - exposed), rel=1e-9, abs=1e-12)
    # by hand: one bucket of 2 s ready at the end of a 10 s backward, s = 0.5: all of it runs
    # after the backward (exposed 2 s, hidden 0), so x = 0.5 x (2 - 2) = 0
    assert _fixed_stretch(np.array([10.0]), np.array([[1.0]]), np.array([[2.0]]),
                          np.array([2.0]), 0.5) == pytest.approx([0.0])  # S = [2]
    # two buckets of 2 s, the first ready at half the backward: it hides (5 + x/2 to 7 + x/2,
    # before 10 + x), the second is exposed: x = 0.5 x (4 - 2) = 1
    assert _fixed_stretch(np.array([10.0]), np.array([[0.5, 1.0]]), np.array([[4.0, 2.0]]),
                          np.array([4.0]), 0.5) == pytest.approx([1.0])  # S = [4, 2]
