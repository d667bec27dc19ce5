"""NCCL's point-to-point schedule (collectives/nccl/p2p.py) against hand derivations from NCCL
v2.30.7-1's rules (commit 73cf112; file:line in the module docstring)."""

from __future__ import annotations

import numpy as np
import pytest

from willitscale.collectives.nccl.env import parse_nccl_env
from willitscale.collectives.nccl.model import nccl_costs
from willitscale.collectives.nccl.p2p import p2p_ladder, send_channels
from willitscale.collectives.nccl.system import NcclSystem, search_graphs
from willitscale.collectives.nccl.run import nccl_choice
from willitscale.collectives.ops import Op

MiB = 1 << 20


def _a100(**env):
    # 8x A100 on NVSwitch: 12 NVLinks of NCCL's 20 GB/s (topo.h sm80) = 240 GB/s path
    return NcclSystem(ranks=8, ranks_per_node=8, compute_capability=8.0, gpu_bandwidth_GBps=240.0,
                      path_bandwidth_GBps=240.0, nvswitch=True, env=parse_nccl_env(env))


def test_a100_one_node_channels_grow_with_the_size():
    # per peer: 2 x (240 / 20) = 24 -> power of two 32; p2pnChannels: runtime 24 (12 search
    # channels doubled) -> 32; nChannelsMin: 32 halved while x 8 ranks > 32 -> 4.
    # chunk 512 KiB: parts from 64 KiB (1/8) to 16 MiB (x32). A send of S starts on 4 channels
    # and doubles while S / channels > 16 MiB, at most 32:
    #   128 MiB: 4 (32 MiB parts) -> 8 (16 MiB);  256 MiB -> 16;  512 MiB -> 32;  1 GiB: 32
    #   100 KiB: min(4, ceil(100 KiB / 64 KiB)) = 2
    ladder = p2p_ladder(ranks=8, nodes=1, runtime_channels=24, intra="nvlink", path_GBps=240.0,
                        nvlink_GBps=20.0)
    assert (ladder.channels_min, ladder.channels_max) == (4, 32)
    sizes = np.array([100 << 10, 128 * MiB, 256 * MiB, 512 * MiB, 1024 * MiB], dtype=float)
    assert ladder.channels(sizes).tolist() == [2, 8, 16, 32, 32]
    # two channels per NVLink: 10 GB/s each; the sum capped by the 240 GB/s path
    assert ladder.bandwidth(sizes[1:]).tolist() == pytest.approx([80e9, 160e9, 240e9, 240e9])


def test_ll_below_16_KiB_per_channel():
    ladder = p2p_ladder(ranks=8, nodes=1, runtime_channels=24, intra="nvlink", path_GBps=240.0,
                        nvlink_GBps=20.0)
    # 16 KiB: one channel (<= 64 KiB), 16384 <= 1 x 16384 -> LL; 32 KiB: one channel, Simple
    assert ladder.is_ll(np.array([16384.0, 32768.0])).tolist() == [True, False]
    # LL moves 8 data bytes in 16: one channel's 10 GB/s halved
    assert float(ladder.bandwidth(16384.0)) == pytest.approx(5e9)


def test_send_recv_time_follows_the_ladder_not_one_bandwidth():
    s = _a100()
    pair, = nccl_costs(Op.SEND_RECV, s)
    t = pair.time(np.array([128 * MiB, 256 * MiB], dtype=float))
    # same part size (16 MiB on each channel at 10 GB/s): the same bandwidth time
    assert t[1] == pytest.approx(t[0])
    assert pair.bandwidth == pytest.approx(240e9)  # saturated figure for the estimate's lines


def test_two_h100_nodes_use_nccl_net_channel_rule():
    # 18 NVLinks x 20.6 -> 36 channels locally; across: one 50 GB/s NIC per GPU behind a 48 GB/s
    # Gen5 path: 1 NIC, ceil(48 / 14) = 4 -> per peer min(36, 4) = 4; runtime 16 -> p2pnChannels
    # 16; 4 x ceil(16/8) = 8 <= 16 keeps 4; nChannelsMin: 4 x 16 > 16 -> 2 -> 1.
    # chunk 128 KiB: parts 64..128 KiB; 1 MiB: 1 -> 2 -> 4 channels (stops at the per-peer 4)
    ladder = p2p_ladder(ranks=16, nodes=2, runtime_channels=16, intra="nvlink", path_GBps=370.8,
                        nvlink_GBps=20.6, local_nics=1, nic_GBps=50.0, pcie_GBps=48.0)
    assert (ladder.channels_min, ladder.channels_max) == (1, 4)
    assert float(ladder.channels(float(MiB))) == 4
    # 4 x 14 GB/s = 56, capped by the NIC behind its 48 GB/s PCIe path
    assert float(ladder.bandwidth(float(MiB))) == pytest.approx(48e9)


def test_env_channel_caps_reach_the_p2p_schedule():
    # NCCL_MAX_NCHANNELS=8: comm->nChannels 8 -> p2pnChannels 8, per peer 8, nChannelsMin 1;
    # 128 MiB: 1 -> 2 -> 4 -> 8 channels (16 MiB parts)
    s = _a100(NCCL_MAX_NCHANNELS=8)
    assert search_graphs(s).runtime_channels == 8
    pair, = nccl_costs(Op.SEND_RECV, s)
    assert (pair.ladder.channels_min, pair.ladder.channels_max) == (1, 8)
    assert float(pair.ladder.channels(128.0 * MiB)) == 8
    # NCCL_P2P_NVL_CHUNKSIZE=131072: parts at most 4 MiB -> 128 MiB needs 32 channels, at most 32
    pair, = nccl_costs(Op.SEND_RECV, _a100(NCCL_P2P_NVL_CHUNKSIZE=131072))
    assert float(pair.ladder.channels(128.0 * MiB)) == 32


def test_send_channels_of_zero_bytes_is_one():
    assert send_channels(np.array([0.0]), 4, 32, 65536, 16 * MiB).tolist() == [1.0]


def test_nccl_choice_runs_p2p_with_the_ladder():
    choice = nccl_choice(Op.SEND_RECV, [128 * MiB, 1024 * MiB], _a100())
    assert [choice.pairs[i].name for i in choice.index] == ["P2P/Simple", "P2P/Simple"]
    bw = np.array([128 * MiB, 1024 * MiB]) / choice.time
    assert bw[0] < bw[1] / 2  # 8 of 32 channels at 128 MiB


def test_all_to_all_bytes_that_stay_on_a_node_take_the_nodes_own_schedule():
    # 2 x 8 A100: of a rank's buffer, 7/16 goes to peers on its node (NVLink, the one-node p2p
    # schedule saturates at the 240 GB/s path: 32 channels x 10 GB/s capped) and 8/16 across.
    # A setting of the network's p2p channels (NCCL_NCHANNELS_PER_NET_PEER=1: one 14 GB/s
    # channel per remote peer) must not touch the NVLink share: before, that share was costed on
    # the network ladder (7/16 GB / 14 GB/s = 31.3 ms instead of 7/16 GB / 240 GB/s = 1.8 ms).
    def system(**env):
        return NcclSystem(ranks=16, ranks_per_node=8, compute_capability=8.0, gpu_bandwidth_GBps=240.0,
                          path_bandwidth_GBps=240.0, nvswitch=True, net_devices=8, net_device_GBps=25.0,
                          env=parse_nccl_env(env))
    (plain,) = nccl_costs(Op.ALL_TO_ALL, system())
    (one_channel,) = nccl_costs(Op.ALL_TO_ALL, system(NCCL_NCHANNELS_PER_NET_PEER=1))
    assert one_channel.bandwidth == plain.bandwidth
    # the across share bounds it: 8 x 8 / 16 = 4 buffers through 8 NICs of min(25, PCIe) GB/s
    devices = 8 * min(25.0, system().pcie_GBps) * 1e9
    assert 1 / plain.bandwidth == pytest.approx(max(7 / 16 / 240e9, 4 / devices), rel=1e-12)


def test_all_to_all_with_one_rank_per_node_is_all_network():
    # 4 nodes x 1 rank: nothing stays on a node; 1 x 3 / 4 of a buffer through one NIC of
    # min(25, PCIe 24) GB/s (the one-node schedule of one rank does not exist: not built)
    s = NcclSystem(ranks=4, ranks_per_node=1, compute_capability=8.0, gpu_bandwidth_GBps=240.0,
                   path_bandwidth_GBps=240.0, nvswitch=True, net_devices=1, net_device_GBps=25.0)
    (cost,) = nccl_costs(Op.ALL_TO_ALL, s)
    assert 1 / cost.bandwidth == pytest.approx(3 / 4 / (min(25.0, s.pcie_GBps) * 1e9), rel=1e-12)
