"""Topology builders, sizing arithmetic and routing: counts and splits derived by hand."""

import numpy as np
import pytest

from willitscale.errors import ConfigError, UnknownNameError
from willitscale.topology import (
    FabricLinks,
    Router,
    build_topology,
    fat_tree,
    max_cluster,
    max_clusters,
    parse_routing,
    rail_only,
    rail_optimized,
)
from willitscale.topology.direct import dragonfly, torus
from willitscale.topology.spec import TopologySpec


def _tier_count(topo, name):
    return int(np.sum(topo.link_tier == topo.tiers.index(name)))


def test_rail_optimized_counts():
    # 16 servers x 8 GPUs, radix 128, 4:1: one leaf per rail with 16 servers and ceil(16/4) = 4
    # uplinks -> 8 leaves + 4 spines; cables: 128 NVLink + 128 NIC + 8*4 uplinks, x2 directed.
    t = rail_optimized(nodes=16, gpus_per_node=8, oversubscription=4)
    assert (t.gpus, t.nodes, t.switches) == (128, 16, 12)
    assert t.links == 2 * (128 + 128 + 32)
    assert _tier_count(t, "leaf->spine") == 32
    # GPU r of every server hangs off leaf r
    r = Router(t)
    assert {t.vertex_names[v] for v in r.gpu_switch[t.gpu_local == 3]} == {"leaf3.0"}


def test_rail_optimized_splits_rails_over_leaves_when_radix_is_small():
    # radix 16 at 7:1: down + ceil(down/7) <= 16 -> down = 14, up = 2 (7:1 exactly);
    # 28 servers -> 2 leaves per rail, 16 leaves, 2 spines with 16 ports each.
    t = rail_optimized(nodes=28, gpus_per_node=8, radix=16, oversubscription=7)
    assert t.params["leaves_per_rail"] == 2 and t.params["uplinks_per_leaf"] == 2
    assert t.params["effective_oversubscription"] == 7
    assert t.switches == 16 + 2


def test_rail_optimized_rejects_spines_that_do_not_divide_uplinks_and_oversize():
    with pytest.raises(ConfigError, match="spines"):
        rail_optimized(nodes=16, oversubscription=4, spines=3)
    with pytest.raises(ConfigError, match="3 tiers"):
        rail_optimized(nodes=64, gpus_per_node=8, radix=8)


def test_rail_only_limit_is_radix_servers():
    # the article: 8 rail switches of 128 ports -> 1,024 GPUs
    assert rail_only(nodes=128, gpus_per_node=8, radix=128).gpus == 1024
    with pytest.raises(ConfigError, match="1024 GPUs"):
        rail_only(nodes=129, gpus_per_node=8, radix=128)


def test_fat_tree_sizes():
    # 2 tiers, k = 4: 4 leaves x 2 hosts = 8 hosts, 2 spines
    t2 = fat_tree(k=4, tiers=2, gpus_per_node=2)
    assert (t2.gpus, t2.switches) == (8, 6)
    # 3 tiers, k = 4 (Al-Fares): k^3/4 = 16 hosts, 4 pods x (2 edge + 2 agg) + (k/2)^2 = 4 cores
    t3 = fat_tree(k=4, tiers=3, gpus_per_node=1)
    assert (t3.gpus, t3.switches) == (16, 20)
    assert _tier_count(t3, "agg->core") == 16  # 8 aggs x 2 uplinks


def test_dragonfly_joins_every_pair_of_groups():
    t = dragonfly(groups=5, routers_per_group=2, global_links=2, gpus_per_node=1)
    grp = {v: int(n.split(".")[0][6:]) for v, n in enumerate(t.vertex_names) if n.startswith("router")}
    g = t.tiers.index("global")
    pairs = {(grp[int(a)], grp[int(b)]) for a, b, tt in zip(t.link_src, t.link_dst, t.link_tier) if tt == g}
    assert pairs == {(i, j) for i in range(5) for j in range(5) if i != j}
    with pytest.raises(ConfigError, match="global links"):
        dragonfly(groups=6, routers_per_group=2, global_links=2)  # 2*2 = 4 < 5


def test_torus_degree():
    t = torus(dims=(4, 4, 2))  # dims of 4 give 2 neighbours each, the dim of 2 one
    sw = np.flatnonzero(t.vertex_kind == 2)
    out = np.bincount(t.link_src[np.isin(t.link_src, sw) & np.isin(t.link_dst, sw)], minlength=t.vertices)
    assert set(out[sw].tolist()) == {5}


def test_build_topology_names_and_spec_round_trip(tmp_path):
    with pytest.raises(UnknownNameError, match="rail-only"):
        build_topology("rail-onyl", nodes=2)
    with pytest.raises(ConfigError, match="do not apply"):
        TopologySpec(kind="rail-only", params={"nodes": 4, "oversubscription": 2})
    spec = TopologySpec(kind="rail-optimized", params={"nodes": 4, "oversubscription": 2})
    spec.save(tmp_path / "t.json")
    again = TopologySpec.load(tmp_path / "t.json").build()
    assert again.links == spec.build().links


@pytest.mark.parametrize(("kind", "radix", "gpus"), [
    ("rail-only", 128, 1024),  # 8 x 128 (the article's rail-only cluster)
    ("rail-optimized", 128, 8192),  # 128 leaves x 64 down ports
    ("fat-tree-2", 128, 8192),  # k^2/2
    ("fat-tree-3", 128, 524288),  # k^3/4
    # non-blocking at both tiers: 128 groups x 64 leaves (8 per rail) x 64 GPUs, = k^3/4
    ("rail-optimized-3", 128, 128 * 64 * 64),
    # balanced dragonfly on GPU ports (Kim et al. 2008, a = 2p = 2h, router radix 4p - 1 <= 128):
    # p = 32 GPUs (4 servers of 8; 5 servers would need 4*40 - 1 = 159 ports), a = 64, h = 32,
    # a*h + 1 = 2,049 groups: 2,049 x 64 routers x 32 GPUs
    ("dragonfly", 128, 2049 * 64 * 32),
])
def test_max_cluster(kind, radix, gpus):
    assert max_cluster(kind, radix=radix).gpus == gpus


def test_the_28k_cluster_is_four_groups_at_7_to_1():
    # group switches 112 down / 16 up (7:1) -> 112 leaves x 64 GPUs = 7,168 per group; 4 groups
    size = max_cluster("rail-optimized-3", radix=128, top_oversubscription=7)
    assert size.gpus // 128 * 4 == 28672
    assert size.layout["leaves_per_pod"] == 112 and size.layout["middle_up"] == 16


def test_oversubscription_is_taken_at_the_leaf_by_every_switched_kind():
    # review-2 F9: one convention for every kind. At 7:1 a 128-port leaf has 112 down / 16 up
    # (112 + ceil(112/7) = 128) instead of 64 / 64, so every kind holds 112/64 = 1.75x the GPUs
    # under the same top tier - the three-tier fat-tree too (it used to thin its cores instead).
    for kind in ("rail-optimized", "fat-tree-2", "fat-tree-3", "rail-optimized-3"):
        blocking = max_cluster(kind, radix=128, oversubscription=7)
        assert blocking.gpus == max_cluster(kind, radix=128).gpus * 112 // 64, kind
        assert (blocking.layout["leaf_down"], blocking.layout["leaf_up"]) == (112, 16)
    assert max_cluster("fat-tree-3", radix=128, oversubscription=7).gpus == 128 * 64 * 112  # 917,504
    # rail-only has no uplinks: the ratio changes nothing, and the row says so
    rail_only_7 = max_cluster("rail-only", radix=128, oversubscription=7)
    assert rail_only_7.gpus == 1024 and "no oversubscription" in rail_only_7.how
    # the middle tier's ratio is top_oversubscription: 112 leaves per pod under 64 aggregation
    # switches with 16 uplinks each, 64 x 16 = 1,024 cores of 128 ports
    top = max_cluster("fat-tree-3", radix=128, top_oversubscription=7)
    assert (top.gpus, top.layout["top"]) == (128 * 112 * 64, 1024)


def test_dragonfly_sizing_is_balanced_on_gpu_ports():
    # review-2 F8: p counts endpoints (GPU NIC ports), not servers. Balanced: a = 2p = 2h, and
    # one more server per router would overflow the radix.
    for radix, g in ((128, 8), (64, 4), (48, 1), (100, 2)):
        d = max_cluster("dragonfly", radix=radix, gpus_per_node=g).layout
        p, a, h = d["gpu_ports_per_router"], d["routers_per_group"], d["global_links_per_router"]
        assert p == h and a == 2 * h and p % g == 0
        assert p + (a - 1) + h <= radix < 4 * (p + g) - 1
        assert d["groups"] == a * h + 1
    # at 7:1 (GPU ports : global links) 11 servers: p = 88, h = ceil(88/7) = 13, a = 26,
    # 88 + 25 + 13 = 126 ports (12 servers: 96 + 27 + 14 = 137 > 128)
    d = max_cluster("dragonfly", radix=128, oversubscription=7).layout
    assert (d["gpu_ports_per_router"], d["global_links_per_router"], d["routers_per_group"]) == (88, 13, 26)
    # a radix too small for one balanced router of whole servers: 4 x 8 - 1 = 31 > 16 ports
    rows = {r.kind: r for r in max_clusters(radix=16)}
    assert rows["dragonfly"].gpus == 0 and "31 ports" in rows["dragonfly"].how
    assert rows["fat-tree-3"].gpus == 16 ** 3 // 4


@pytest.mark.parametrize(("kind", "radix", "g", "s", "build"), [
    ("rail-only", 8, 2, 1, lambda: rail_only(nodes=8, gpus_per_node=2, radix=8)),
    # leaf 6 down / 2 up at 3:1 (6 + 2 = 8): 4 leaves per rail x 2 rails, 2 spines
    ("rail-optimized", 8, 2, 3, lambda: rail_optimized(nodes=24, gpus_per_node=2, radix=8, oversubscription=3)),
    ("fat-tree-2", 8, 1, 3, lambda: fat_tree(k=8, tiers=2, gpus_per_node=1, oversubscription=3)),
    # edges 6 down / 2 up: 8 pods x 4 edges x 6 hosts = 192; 8 x (4 + 2) + 2 x 4 cores = 56 switches
    ("fat-tree-3", 8, 1, 3, lambda: fat_tree(k=8, tiers=3, gpus_per_node=1, oversubscription=3)),
    ("fat-tree-3", 8, 1, 1, lambda: fat_tree(k=8, tiers=3, gpus_per_node=1)),
    # radix 12, one-GPU servers: p = h = 3, a = 6 (3 + 5 + 3 = 11 ports), 19 groups
    ("dragonfly", 12, 1, 1, lambda: dragonfly(groups=19, routers_per_group=6, global_links=3,
                                              nodes_per_router=3, gpus_per_node=1)),
])
def test_sizing_arithmetic_is_what_the_builders_build(kind, radix, g, s, build):
    size, t = max_cluster(kind, radix=radix, gpus_per_node=g, oversubscription=s), build()
    assert (t.gpus, t.switches) == (size.gpus, size.switches)
    if kind == "dragonfly":
        assert t.params["router_ports"] <= radix and t.params["global_oversubscription"] == 1


def test_fat_tree_three_tiers_tapers_the_edge_and_the_aggregation_tier():
    # k = 8, top 3:1: aggregation switches 6 down / 2 up -> 6 edges per pod of 4 hosts, 4
    # aggregation switches per pod, 4 planes x 2 cores = 8 cores; 8 pods x 6 x 4 = 192 hosts
    t = fat_tree(k=8, tiers=3, gpus_per_node=1, top_oversubscription=3)
    assert (t.gpus, t.params["cores"], t.params["effective_top_oversubscription"]) == (192, 8, 3)
    assert _tier_count(t, "agg->core") == 8 * 4 * 2
    with pytest.raises(ConfigError, match="aggregation tier"):
        fat_tree(k=8, tiers=2, top_oversubscription=2)


def test_oversubscription_is_a_capacity_ratio_with_faster_uplinks():
    # 8 servers x 2 GPUs, uplinks at 100 GB/s against 50 GB/s NIC ports: 8 GPU ports x 50 GB/s =
    # 400 GB/s down per leaf need 4 uplinks of 100 GB/s for 1:1 (not 8)
    t = rail_optimized(nodes=8, gpus_per_node=2, radix=16, links=FabricLinks(uplink_bandwidth=100e9))
    assert t.params["uplinks_per_leaf"] == 4 and t.params["effective_oversubscription"] == 1


# -- routing ---------------------------------------------------------------------------------
def _route(t, src, dst, name, seed=0, key=None):
    src, dst = np.atleast_1d(src), np.atleast_1d(dst)
    return Router(t).route(src, dst, np.zeros(src.size) if key is None else key, parse_routing(name, seed=seed))


def test_spray_splits_evenly_over_spines():
    t = rail_optimized(nodes=4, gpus_per_node=2, oversubscription=1)  # 4 down, 4 up, 4 spines
    r = _route(t, 0, 3, "spray")  # gpu0.0 -> gpu1.1: rail 0 -> rail 1 through every spine
    up = r.link[np.array([t.tiers[t.link_tier[e]] == "leaf->spine" for e in r.link])]
    fr = r.frac[np.isin(r.link, up)]
    assert fr.size == 4 and np.allclose(fr, 1 / 4)
    # path latency: GPU->leaf and leaf->GPU carry half the NIC's 2.7 us each, plus two
    # switch-to-switch hops of 0.5 us (defaults)
    assert r.latency[0] == pytest.approx(2.7e-6 + 2 * 0.5e-6)


def test_ecmp_takes_one_path_deterministically():
    t = rail_optimized(nodes=4, gpus_per_node=2, oversubscription=1)
    a = _route(t, np.zeros(50, int), np.full(50, 3), "ecmp", seed=1, key=np.arange(50))
    b = _route(t, np.zeros(50, int), np.full(50, 3), "ecmp", seed=1, key=np.arange(50))
    assert np.array_equal(a.link, b.link)
    assert a.link.size == 50 * 4 and np.all(a.frac == 1)  # NIC, up, down, NIC per flow
    spines_used = {int(t.link_dst[e]) for e in a.link if t.tiers[t.link_tier[e]] == "leaf->spine"}
    assert len(spines_used) > 1  # 50 keys hash onto more than one of the 4 spines


def test_pxn_moves_to_the_destination_rail_over_nvlink():
    t = rail_optimized(nodes=2, gpus_per_node=4)
    r = _route(t, 0, 6, "rail")  # gpu0.0 -> gpu1.2: NVLink to gpu0.2, then rail 2
    names = [t.link_name(int(e)) for e in r.link]
    assert names == ["gpu0.0->nvs0", "nvs0->gpu0.2", "gpu0.2->leaf2.0", "leaf2.0->gpu1.2"]


def test_rail_only_needs_pxn_and_gets_it():
    t = rail_only(nodes=2, gpus_per_node=4)
    r = _route(t, 0, 6, "ecmp")  # rail-only forces the NVLink move
    assert [t.link_name(int(e)) for e in r.link][:2] == ["gpu0.0->nvs0", "nvs0->gpu0.2"]


def test_every_route_delivers_all_bytes():
    # whatever the scheme, each flow leaves its GPU and enters the destination exactly once
    t = fat_tree(k=4, tiers=3, gpus_per_node=2)
    rng = np.random.default_rng(0)
    src = rng.integers(0, t.gpus, 40)
    dst = (src + rng.integers(1, t.gpus, 40)) % t.gpus
    for name in ("ecmp", "spray", "adaptive"):
        r = _route(t, src, dst, name, key=np.arange(40))
        into_dst = np.bincount(r.flow, weights=r.frac * (t.link_dst[r.link] == t.gpu_vertex[dst[r.flow]]),
                               minlength=40)
        assert np.allclose(into_dst, 1.0)


def test_dragonfly_reports_uneven_cables_between_group_pairs():
    # 4 groups x 4 routers x 2 global links = 8 global ports per group for 3 peers: two rounds of
    # one cable per pair use 6 ports; the third round reaches (0,1), (0,2), (1,2) before groups 0
    # and 1 run out (group 2 too after (1,2)), so those pairs have 3 cables and the others 2
    t = dragonfly(groups=4, routers_per_group=4, global_links=2, gpus_per_node=1)
    assert (t.params["cables_per_group_pair_min"], t.params["cables_per_group_pair_max"]) == (2, 3)
    # a single leaf (one rail, few servers) has no uplinks and reports none
    one = rail_optimized(nodes=4, gpus_per_node=1, oversubscription=4)
    assert one.params["uplinks_per_leaf"] == 0 and "effective_oversubscription" not in one.params


@pytest.mark.parametrize("batch", [256, 5])
def test_hop_distances_of_all_destinations_at_once_are_breadth_first_distances(batch, monkeypatch):
    # the router's one-bit-per-destination search must give scipy's BFS distance from every
    # switch to every destination switch, over more than 64 destinations (several words), in
    # batches of any size; -1 where a switch cannot reach the destination (none here)
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import shortest_path

    from willitscale.topology import routing
    from willitscale.topology.graph import VertexKind

    monkeypatch.setattr(routing, "_DIST_BATCH", batch)
    for t in (TopologySpec(kind="fat-tree", params=dict(k=8, tiers=3, gpus_per_node=1)).build(),  # 80 switches
              dragonfly(groups=4, routers_per_group=4, global_links=2, nodes_per_router=2, gpus_per_node=1),
              torus(dims=(4, 3, 2), gpus_per_node=1)):
        sw = np.flatnonzero(t.vertex_kind == VertexKind.SWITCH)
        keep = np.isin(t.link_src, sw) & np.isin(t.link_dst, sw)
        adj = csr_matrix((np.ones(keep.sum()), (t.link_src[keep], t.link_dst[keep])), shape=(t.vertices,) * 2)
        want = shortest_path(adj, unweighted=True, directed=True)[np.ix_(sw, sw)]  # [from, to]
        got = np.array(Router(t).distances(sw.tolist())).T  # per destination: from every switch
        assert np.array_equal(got, np.where(np.isfinite(want), want, -1))
