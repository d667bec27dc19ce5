"""Point-to-point sends as NCCL runs them: channels per peer, chunk and part sizes, protocol.

NCCL does not cost send/recv with its tuner; it schedules them with its own rules, which this
module follows (NCCL v2.30.7-1, commit 73cf112295c33aee2b895f329f592f2a9b4b0f97):

1. **Channels a peer may use** (``p2pnChannelsPerPeer``, src/graph/paths.cc 920-974): to a
   GPU of the node over NVLink, two per NVLink of the path, ``2 max(1, floor(path_bw /
   nvlink_bw))`` (paths.cc 933-936); over PCIe two (paths.cc 937-939); to another node
   ``NCCL_NCHANNELS_PER_NET_PEER``, or ``max(local NICs, ceil(their GB/s / 14))`` with 14 GB/s
   ``NCCL_P2P_PER_CHANNEL_NET_BW`` (paths.cc 918, 941-951; the local NICs added until they
   match the GPU's PCIe path, topo.cc 1974-1999). The minimum over the peers, rounded up to a
   power of two (paths.cc 989).
2. **Channels of the communicator for p2p** (``p2pnChannels``, paths.cc 978-991): the
   communicator's channels (``comm->nChannels``) within NCCL_MIN/MAX_P2P_NCHANNELS (1 / 64),
   rounded up to a power of two; per peer at most that (one node), or, across nodes, halved
   while ``perPeer x ceil(peers / 8)`` exceeds it (paths.cc 993-1001; 8 =
   NCCL_MAX_DEV_WORK_P2P_PER_BATCH, src/include/device.h 391).
3. **Channels one send uses** (src/enqueue.cc 1143-1146 and 909-923): start from
   ``nChannelsMin`` (the per-peer count halved while ``nChannelsMin x ranks > p2pnChannels``)
   and double while a channel's part exceeds ``maxPartSize`` (one node: 32 chunks; across
   nodes: one chunk), up to the per-peer count; fewer when the message has fewer than
   ``minPartSize`` bytes per channel (one node: 1/8 chunk; across: 1/2 chunk).
4. **Chunk** (``p2pChunkSize``, init.cc 818-843): 512 KiB over NVLink inside a node
   (NCCL_P2P_NVL_CHUNKSIZE), 128 KiB across nodes (NCCL_P2P_NET_CHUNKSIZE; x2 on ARM hosts of
   sm100) or over PCIe (NCCL_P2P_PCI_CHUNKSIZE), at most 1/8 of the 4 MiB Simple buffer
   (NCCL_BUFFSIZE, init.cc 813; NCCL_STEPS = 8, device.h 26).
5. **Protocol** (enqueue.cc 859, 932-933): LL when the message is at most 16 KiB
   (NCCL_P2P_LL_THRESHOLD) per channel, Simple otherwise.

**Bandwidth per channel** is not a figure NCCL's source states for p2p. We take the one its
channel rule (1) is built on: two channels per NVLink, so one channel is given half of NCCL's
NVLink bandwidth (``nvlink_bw / 2``: 10 GB/s on A100, topo.h 19-24); over PCIe half the path;
across nodes NCCL_P2P_PER_CHANNEL_NET_BW (14 GB/s) per channel. The sum is capped by the path
(NCCL's GPU-to-GPU path bandwidth inside a node; across nodes also the GPU's NICs). LL moves
8 data bytes in 16 (half the bandwidth, as NCCL's ring LL, tuning.cc 326).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from willitscale.collectives.nccl.env import MAXCHANNELS, NcclEnv
from willitscale.errors import ConfigError

__all__ = ["P2pLadder", "p2p_ladder", "send_channels"]

#: defaults of NCCL's p2p parameters (file:line of v2.30.7-1 in the module docstring)
NVL_CHUNK, NET_CHUNK, PCI_CHUNK = 1 << 19, 1 << 17, 1 << 17
BUFFSIZE, NCCL_STEPS = 1 << 22, 8
LL_THRESHOLD = 16384
PER_CHANNEL_NET_BW = 14.0  #: GB/s
P2P_PER_BATCH = 8  #: NCCL_MAX_DEV_WORK_P2P_PER_BATCH
LL_FACTOR = 0.5


def _pow2_up(x: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(x, 1))))


@dataclass(frozen=True, slots=True, kw_only=True)
class P2pLadder:
    """How NCCL splits one send of ``S`` bytes: channels as a function of ``S`` (rule 3), each
    at ``per_channel`` bytes/s, the sum capped at ``cap`` bytes/s; LL up to ``ll_threshold``
    bytes per channel."""

    channels_min: int
    channels_max: int
    min_part: int  #: bytes
    max_part: int  #: bytes
    per_channel: float  #: bytes/s
    cap: float  #: bytes/s
    ll_threshold: int  #: bytes per channel

    def __post_init__(self) -> None:
        if not (1 <= self.channels_min <= self.channels_max and self.min_part > 0 and self.max_part > 0
                and self.per_channel > 0 and self.cap > 0):
            raise ConfigError("P2pLadder", self, "channels 1 <= min <= max and positive sizes and rates")

    def channels(self, size) -> np.ndarray:
        return send_channels(size, self.channels_min, self.channels_max, self.min_part, self.max_part)

    def is_ll(self, size) -> np.ndarray:
        size = np.asarray(size, dtype=float)
        return size <= self.channels(size) * self.ll_threshold

    def bandwidth(self, size) -> np.ndarray:
        """bytes/s of one send of ``size`` bytes (numpy broadcast)."""
        size = np.asarray(size, dtype=float)
        bw = np.minimum(self.channels(size) * self.per_channel, self.cap)
        return np.where(self.is_ll(size), bw * LL_FACTOR, bw)

    @property
    def saturated(self) -> float:
        """bytes/s once every channel a peer may use is used (large messages)."""
        return min(self.channels_max * self.per_channel, self.cap)


def send_channels(size, channels_min: int, channels_max: int, min_part: int, max_part: int) -> np.ndarray:
    """Channels NCCL stripes one send of ``size`` bytes over (enqueue.cc 909-923)."""
    size = np.asarray(size, dtype=float)
    out = np.minimum(channels_min, np.maximum(1.0, np.ceil(size / min_part)))
    part = np.maximum(min_part, np.ceil(size / out))
    while True:
        grow = (part > max_part) & (out <= channels_max // 2)
        if not grow.any():
            return np.where(size <= 0, 1.0, out)
        out = np.where(grow, out * 2, out)
        part = np.where(grow, np.ceil(size / out), part)


def _chunk(nodes: int, all_nvlink: bool, arm_sm100: bool, env: NcclEnv) -> int:
    if nodes > 1:
        chunk = (2 if arm_sm100 else 1) * (NET_CHUNK if env.p2p_net_chunksize is None else env.p2p_net_chunksize)
    elif all_nvlink:
        chunk = NVL_CHUNK if env.p2p_nvl_chunksize is None else env.p2p_nvl_chunksize
    else:
        chunk = PCI_CHUNK if env.p2p_pci_chunksize is None else env.p2p_pci_chunksize
    buff = BUFFSIZE if env.buffsize is None else env.buffsize
    return max(1, min(chunk, buff // NCCL_STEPS))


def _net_channels(local_nics: int, nic_GBps: float, pcie_GBps: float, env: NcclEnv) -> int:
    if env.nchannels_per_net_peer is not None:
        return env.nchannels_per_net_peer
    count, total = 0, 0.0
    for _ in range(max(1, local_nics)):
        total += min(nic_GBps, pcie_GBps)
        count += 1
        if total >= pcie_GBps:
            break
    per_ch = PER_CHANNEL_NET_BW if env.p2p_per_channel_net_bw is None else env.p2p_per_channel_net_bw
    return max(count, math.ceil(int(total) / int(per_ch)))


def p2p_ladder(*, ranks: int, nodes: int, runtime_channels: int, intra: str, path_GBps: float,
               nvlink_GBps: float, local_nics: int = 0, nic_GBps: float = 0.0, pcie_GBps: float = 24.0,
               arm_sm100: bool = False, env: NcclEnv = NcclEnv()) -> P2pLadder:
    """NCCL's p2p schedule for one communicator (module docstring, rules 1-5). ``path_GBps``:
    NCCL's GPU-to-GPU path bandwidth inside a node; ``nvlink_GBps``: its bandwidth of one NVLink;
    ``local_nics``/``nic_GBps``: the NICs local to one GPU and their speed (across nodes)."""
    nvlink = intra == "nvlink"
    intra_channels = 2 * max(1, int(path_GBps / nvlink_GBps + 1e-9)) if nvlink else 2
    peers = []  # the minimum over the peers (paths.cc 965-972): ones on the node, ones across
    if ranks > nodes:
        peers.append(intra_channels)
    if nodes > 1:
        peers.append(_net_channels(local_nics, nic_GBps, pcie_GBps, env))
    per_peer = _pow2_up(min(peers))
    max_p2p = env.max_p2p_nchannels if env.max_p2p_nchannels is not None else MAXCHANNELS
    min_p2p = env.min_p2p_nchannels if env.min_p2p_nchannels is not None else 1
    p2p_channels = max(min(runtime_channels, max_p2p), min_p2p)
    p2p_channels = min(_pow2_up(p2p_channels), MAXCHANNELS)
    if nodes > 1 and env.nchannels_per_net_peer is None:
        while per_peer * math.ceil(ranks / P2P_PER_BATCH) > p2p_channels and per_peer > 1:
            per_peer //= 2
    else:
        per_peer = min(p2p_channels, per_peer)
    channels_min = per_peer
    while channels_min * ranks > p2p_channels and channels_min > 1:
        channels_min //= 2
    chunk = _chunk(nodes, nvlink, arm_sm100, env)
    min_part, max_part = (chunk // 2, chunk) if nodes > 1 else (chunk // 8, chunk * 32)
    if nodes > 1:
        per_channel = float(PER_CHANNEL_NET_BW if env.p2p_per_channel_net_bw is None
                            else env.p2p_per_channel_net_bw)
        cap = min(path_GBps, max(1, local_nics) * min(nic_GBps, pcie_GBps))
    else:
        per_channel = (nvlink_GBps if nvlink else path_GBps) / 2
        cap = path_GBps
    return P2pLadder(channels_min=channels_min, channels_max=per_peer, min_part=max(1, min_part),
                     max_part=max(1, max_part), per_channel=per_channel * 1e9, cap=cap * 1e9,
                     ll_threshold=env.p2p_ll_threshold if env.p2p_ll_threshold is not None else LL_THRESHOLD)
