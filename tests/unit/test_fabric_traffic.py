"""Traffic generators: ring orders, channels, layouts, jobs, incast, the traffic matrix."""

import numpy as np
import pytest

from willitscale.errors import ConfigError
from willitscale.fabric import (
    ParallelLayout,
    StepComm,
    simulate,
    step_traffic,
    traffic_matrix,
)
from willitscale.fabric.traffic import (
    channel_orders,
    collective_traffic,
    incast_traffic,
    job_nodes,
    jobs_traffic,
    ring_order,
)
from willitscale.topology import FabricLinks, rail_optimized

LINKS = FabricLinks(nic_bandwidth=50e9, nic_latency=2e-6, nvlink_bandwidth=450e9, nvlink_latency=1e-6,
                    switch_latency=0.5e-6)


def _hops_change_rail(order, gpn):
    nxt = np.roll(order, -1)
    inter = order // gpn != nxt // gpn
    return np.sum(inter & (order % gpn != nxt % gpn)), np.sum(inter)


def test_rail_order_keeps_server_hops_on_a_rail_and_flat_does_not():
    # 4 servers: rail placement joins every pair of servers on one rail (even count closes too)
    assert _hops_change_rail(ring_order(4, range(4), "rail"), 4) == (0, 4)
    assert _hops_change_rail(ring_order(4, range(4), "flat"), 4) == (4, 4)


def test_channels_keep_the_snake_and_use_different_rails():
    gn = np.arange(32) // 8
    orders = channel_orders(ring_order(8, range(4), "rail"), gn, 8)
    rails = set()
    for o in orders:
        changed, inter = _hops_change_rail(o, 8)
        assert (changed, inter) == (0, 4)
        rails |= set((o[np.flatnonzero(o // 8 != np.roll(o, -1) // 8)] % 8).tolist())
    assert rails == set(range(8))  # every NIC rail carries some channel


def test_layout_groups_tp_innermost():
    lay = ParallelLayout(tp=2, dp=2, pp=2)
    assert lay.groups("tp").tolist() == [[0, 1], [2, 3], [4, 5], [6, 7]]
    assert lay.groups("dp").tolist() == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert lay.groups("pp").tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    with pytest.raises(ConfigError, match="permutation"):
        ParallelLayout(order=("tp", "dp"))


def test_gpt3_layout_leaves_99_percent_of_gpu_pairs_idle():
    # GPT-3 175B as trained in Megatron-LM (Narayanan et al., SC21, Table 1): TP 8, PP 8 on 1,024
    # GPUs -> DP 16. Ring algorithms, one channel. Pairs with traffic:
    #   TP: a ring of 8 per server = 8 pairs x 128 servers          = 1,024
    #   PP: 7 stage boundaries x 8 TP ranks x 16 DP replicas        =   896
    #   DP: a ring of 16 = 16 pairs x (8 TP x 8 PP) groups          = 1,024
    # 2,944 of 1024*1023/2 = 523,776 pairs -> 99.44% idle (article, after Meta's rail-only paper: ~99%)
    t = rail_optimized(nodes=128, gpus_per_node=8, links=LINKS)
    tr = step_traffic(t, ParallelLayout(tp=8, pp=8, dp=16),
                      StepComm(tp_bytes=1e6, tp_count=1, pp_bytes=1e6, pp_count=1, dp_bytes=1e6))
    tm = traffic_matrix(tr, t.gpus)
    assert tm.pairs == 523776 and tm.pairs_with_traffic == 2944
    assert tm.idle_pair_share == pytest.approx(1 - 2944 / 523776)
    # where the pairs sit: TP inside servers; DP (stride 8 GPUs = one server) and PP (stride 128
    # GPUs = 16 servers) keep the local GPU index, so they stay on one rail; nothing crosses rails:
    # a rail-only fabric carries this layout without a spine
    by = traffic_matrix(tr, t)
    assert dict(by.pairs_by_placement) == {"same_server": 1024, "same_rail": 896 + 1024, "cross_rail": 0}
    assert by.gpus_with_traffic == 1024 and by.byte_share_by_placement["cross_rail"] == 0


def test_flat_ring_puts_its_server_hops_across_rails():
    # 16 servers x 8 GPUs, 8 channels. Flat order: channel k walks each server from local k to
    # local k-1 and hops to local k of the next server - every hop between servers changes rails:
    # 8 channels x 16 hops = 128 cross-rail pairs; inside servers the channels' rotations cover
    # the 8 neighbour pairs of each server's cycle: 128. A ring step moves 128 equal flows per
    # channel, 16 of them between servers: 16/128 = 12.5% of the bytes cross rails. The rail
    # order (odd servers walked backwards) keeps those 128 server hops on one rail.
    t = rail_optimized(nodes=16, gpus_per_node=8, links=LINKS)
    flat = traffic_matrix(collective_traffic(t, "all_reduce", 1e9, placement="flat"), t)
    assert dict(flat.pairs_by_placement) == {"same_server": 128, "same_rail": 0, "cross_rail": 128}
    assert flat.byte_share_by_placement["cross_rail"] == pytest.approx(16 / 128)
    rail = traffic_matrix(collective_traffic(t, "all_reduce", 1e9, placement="rail"), t)
    assert rail.pairs_by_placement["cross_rail"] == 0 and rail.pairs_by_placement["same_rail"] == 128


def test_jobs_and_incast():
    assert [n.tolist() for n in job_nodes(4, 2, "interleaved")] == [[0, 2], [1, 3]]
    with pytest.raises(ConfigError, match="divisor"):
        job_nodes(5, 2)
    t = rail_optimized(nodes=4, gpus_per_node=1, links=LINKS)
    r = simulate(t, jobs_traffic(t, 2, "all_reduce", 1e9))
    # each job: 2 servers on one leaf, ring of 2 = 2 steps of 0.5 GB at 50 GB/s + 2 us; no sharing
    assert r.stream_times["job0"] == pytest.approx(2 * (0.01 + 2e-6))
    assert r.stream_times["job1"] == r.stream_times["job0"]
    # incast: 3 senders x 1 GB into one 50 GB/s link = 60 ms (+ 2 us)
    assert simulate(t, incast_traffic([1, 2, 3], 0, 1e9)).completion_time == pytest.approx(0.06 + 2e-6)


def test_hierarchical_rings_across_servers_stay_on_one_rail_with_rail_placement():
    # The rail placement walks odd servers backwards (0123 / 3210 / ...). The hierarchical
    # all_reduce's ring across servers joins the GPUs of one local index (NCCL: one NIC rail), so
    # whatever the ring order nothing crosses rails: no byte on a leaf->spine link, and a 4:1
    # spine costs nothing (it used to pair local j with local 3 - j, through the spine).
    times = {}
    for over in (4, 1):
        t = rail_optimized(nodes=4, gpus_per_node=4, oversubscription=over, links=LINKS)
        r = simulate(t, collective_traffic(t, "all_reduce", 1e9, algorithm="hierarchical", placement="rail"))
        up = np.asarray(t.tiers)[t.link_tier] == "leaf->spine"
        assert r.link_bytes[up].sum() == 0
        times[over] = r.completion_time
    assert times[4] == pytest.approx(times[1], rel=1e-12)
