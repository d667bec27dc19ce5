"""One rank layout for the estimate and the fabric (topology/placement.py).

The estimate summarises each kind of group per plan (size, members per node, nodes spanned,
rail alignment) in closed form; the flow simulator takes the explicit member lists. Both come
from the same mixed-radix definition; here the explicit lists, cut at node boundaries, must give
the summary's numbers for every layout that places its groups evenly.
"""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from willitscale.fabric.step import ParallelLayout
from willitscale.topology.placement import (
    AXES,
    GROUP_AXES,
    group_members,
    group_placement,
    uneven_groups,
)

DEGREE = st.sampled_from([1, 2, 3, 4, 8])


@st.composite
def layouts(draw):
    degrees = {a: draw(DEGREE) for a in ("tp", "cp", "pp")}
    ep = draw(st.sampled_from([1, 2, 4]))
    degrees["ep"] = ep
    degrees["dp"] = ep * draw(st.sampled_from([1, 2, 3, 4]))
    order = tuple(draw(st.permutations(AXES)))
    return degrees, order, draw(st.sampled_from([1, 2, 4, 8]))


@settings(max_examples=300, deadline=None)
@given(layouts())
def test_explicit_groups_match_the_closed_form(case):
    degrees, order, gpus_per_node = case
    if uneven_groups(degrees, gpus_per_node, order).item():
        return  # the estimate rejects these plans (uneven_placement); nothing to compare
    world = degrees["tp"] * degrees["cp"] * degrees["dp"] * degrees["pp"]
    for kind in GROUP_AXES:
        members = group_members(kind, degrees, order)
        # every rank in exactly one group of each kind
        assert sorted(members.reshape(-1).tolist()) == list(range(world))
        place = group_placement(kind, {k: np.array([v]) for k, v in degrees.items()},
                                gpus_per_node, order)
        nodes = members // gpus_per_node
        spans = [len(np.unique(row)) for row in nodes]
        per_node = [np.unique(row, return_counts=True)[1].max() for row in nodes]
        assert members.shape[1] == place.size[0]
        assert max(spans) == place.nodes[0]
        assert max(per_node) == place.members_per_node[0]


def test_the_fabric_layout_counts_ep_inside_dp_as_the_estimate_does():
    # tp 2, ep 2, dp 4: 8 ranks (ep is carved out of dp), not 16
    layout = ParallelLayout(tp=2, ep=2, dp=4)
    assert layout.world == 8
    assert layout.groups("ep").tolist() == [[0, 2], [1, 3], [4, 6], [5, 7]]
    # the gradient group: every data-parallel replica of a TP rank
    assert layout.groups("dp").tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]]
