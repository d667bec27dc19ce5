"""The data the figures draw: crossover, ideal line, efficiency, breakdown parts (exact)."""

import math

import pytest

from willitscale.report.chartdata import (
    breakdown_parts,
    crossover,
    efficiency,
    ideal_throughput,
)


def test_crossover_interpolates_in_log2_nodes():
    # compute 0.42 s flat; comms 0.2 s at 2 nodes, 0.62 s at 4 nodes: comms - compute goes
    # -0.22 -> +0.20 while log2(nodes) goes 1 -> 2, so it is zero at t = 0.22 / 0.42 of the way:
    # log2 x = 1.5238, x = 2 ** 1.5238 = 2.875
    at = crossover([1, 2, 4], [0.42, 0.42, 0.42], [0.05, 0.2, 0.62])
    assert at == pytest.approx(2 ** (1 + 0.22 / 0.42))
    assert 2 < at < 4


def test_crossover_exactly_on_a_point_and_none_cases():
    # equal at 2 nodes, above at 4: d = (-1, 0, +1); first d > 0 is at index 2, interpolating
    # from d0 = 0 at x = 2 gives t = 0: the crossover is 2 itself
    assert crossover([1, 2, 4], [1, 1, 1], [0, 1, 2]) == pytest.approx(2.0)
    assert crossover([1, 2, 4], [1, 1, 1], [0.1, 0.2, 0.3]) is None  # never above
    assert crossover([1, 2, 4], [1, 1, 1], [2, 3, 4]) is None  # above from the start


def test_ideal_and_efficiency():
    # 8 GPUs at 100 tok/s: the ideal at 32 GPUs is 400; measured 200 is 50% efficient
    assert ideal_throughput([8, 16, 32], [100, 180, 200]) == [100, 200, 400]
    assert efficiency([8, 16, 32], [100, 180, 200]) == pytest.approx([1.0, 0.9, 0.5])


def test_breakdown_parts_add_up_to_the_step(handbook_estimates):
    parts = breakdown_parts([e.breakdown for e in handbook_estimates])
    for i, est in enumerate(handbook_estimates):
        assert math.fsum(v[i] for v in parts.values()) == pytest.approx(est.step_time, rel=1e-9)
    # zero everywhere (no data loading modelled, no pipeline) is left out of the legend
    assert "data" not in parts and "bubble" not in parts
    assert {"forward", "backward", "exposed_comms", "optimizer"} <= set(parts)


def test_pair_matrix_places_and_groups_bytes():
    # 4 GPUs: 0->1 carries 5 B, 2->3 carries 7 B, 1->2 carries 1 B; ids are src * 4 + dst
    from willitscale.report.chartdata import pair_matrix

    m = pair_matrix([1, 11, 6], [5.0, 7.0, 1.0], 4)
    assert m[0][1] == 5 and m[2][3] == 7 and m[1][2] == 1 and m.sum() == 13
    # nodes of 2 GPUs: 0->1 and 2->3 stay inside nodes 0 and 1; 1->2 crosses from node 0 to 1
    assert pair_matrix([1, 11, 6], [5.0, 7.0, 1.0], 4, group=2).tolist() == [[5, 1], [0, 7]]
