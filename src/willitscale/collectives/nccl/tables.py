"""NCCL's own tuning constants, as published in its source: the numbers, not its code.

Every table cites the file and lines of NCCL **v2.30.7-1** (github.com/NVIDIA/nccl, tag
``v2.30.7-1``, commit 73cf112295c33aee2b895f329f592f2a9b4b0f97) it comes from; the meaning of
each is in docs/collectives.md ("NCCL's model"). Units: microseconds for latencies and GB/s
(GB = 1e9 bytes, one direction, per *search channel* unless stated) for bandwidths, as NCCL
writes them. Protocol order in every 3-tuple: (LL, LL128, Simple). Architecture order in every
4-tuple: (Volta, Ampere, Hopper, Blackwell). Node-count order in every tuple named by ``N``:
(1 node, 2 nodes, 3 or more nodes).
"""

from __future__ import annotations

from enum import IntEnum, StrEnum

__all__ = ["NcclAlgorithm", "Protocol", "Arch", "NCCL_VERSION", "BASE_LATENCY", "HW_LATENCY",
           "LL_MAX_BW", "PER_CH_MAX_RING_LL128", "PER_CH_MAX_TREE_LL128", "PER_CH_MAX_TREE",
           "PER_CH_MAX_NVLS_TREE", "NVLS_EFFICIENCY", "TREE_CORRECTION", "NVLINK_LINK_BW",
           "PCIE_X16_BW", "SPEEDS_INTRA", "SPEEDS_INTER", "arch_of", "nvlink_link_bw"]

NCCL_VERSION = "NCCL v2.30.7-1 (commit 73cf112)"


class NcclAlgorithm(StrEnum):
    """NCCL's algorithms, in the order of its tuner indices (src/include/plugin/nccl_tuner.h
    27-35): a tie in time goes to the earlier one (src/enqueue.cc 2035-2044)."""

    TREE = "Tree"
    RING = "Ring"
    COLLNET_DIRECT = "CollNetDirect"
    COLLNET_CHAIN = "CollNetChain"
    NVLS = "NVLS"
    NVLS_TREE = "NVLSTree"
    PAT = "PAT"
    #: not one of NCCL's tuned algorithms: all_to_all and send/recv are point-to-point sends,
    #: which NCCL does not cost; willitscale's own model (docs/collectives.md) uses this name
    P2P = "P2P"


class Protocol(IntEnum):
    """NCCL's protocols, in its index order (nccl_tuner.h 37-41)."""

    LL = 0
    LL128 = 1
    SIMPLE = 2

    @property
    def label(self) -> str:
        return ("LL", "LL128", "Simple")[self]


class Arch(IntEnum):
    """The architecture row of NCCL's tables (tuning.cc 263-266)."""

    VOLTA = 0  #: compute capability below 8.0
    AMPERE = 1  #: 8.x
    HOPPER = 2  #: 9.x
    BLACKWELL = 3  #: 10.0 and up


def arch_of(compute_capability: float) -> Arch:
    """NCCL's architecture row for a compute capability (tuning.cc 263-266)."""
    if compute_capability >= 10.0:
        return Arch.BLACKWELL
    if compute_capability >= 9.0:
        return Arch.HOPPER
    if compute_capability >= 8.0:
        return Arch.AMPERE
    return Arch.VOLTA


_A = NcclAlgorithm
#: base latency of a collective, us, per algorithm and protocol (tuning.cc 150-155)
BASE_LATENCY: dict[NcclAlgorithm, tuple[float, float, float]] = {
    _A.TREE: (6.8, 14.0, 8.4), _A.RING: (6.6, 14.0, 8.4),
    _A.COLLNET_DIRECT: (0.0, 0.0, 0.0), _A.COLLNET_CHAIN: (0.0, 0.0, 0.0),
    _A.NVLS: (0.0, 0.0, 0.0), _A.NVLS_TREE: (0.0, 0.0, 0.0), _A.PAT: (8.0, 8.0, 8.0),
}

#: per-hop hardware latency, us, per link type ("nvlink", "pci", "net"), algorithm and protocol
#: (tuning.cc 158-163 NVLink, 165-169 PCI, 171-175 NET)
HW_LATENCY: dict[str, dict[NcclAlgorithm, tuple[float, float, float]]] = {
    "nvlink": {_A.TREE: (0.6, 1.25, 4.0), _A.RING: (0.6, 1.9, 3.4), _A.COLLNET_DIRECT: (0.0, 0.0, 3.7),
               _A.COLLNET_CHAIN: (0.0, 0.0, 2.8), _A.NVLS: (0.0, 0.0, 25.0), _A.NVLS_TREE: (0.0, 0.0, 25.0),
               _A.PAT: (0.0, 0.0, 4.0)},
    "pci": {_A.TREE: (1.0, 1.9, 4.0), _A.RING: (1.0, 2.5, 5.7), _A.COLLNET_DIRECT: (0.0, 0.0, 3.7),
            _A.COLLNET_CHAIN: (0.0, 0.0, 2.8), _A.NVLS: (0.0, 0.0, 0.0), _A.NVLS_TREE: (0.0, 0.0, 0.0),
            _A.PAT: (0.0, 0.0, 4.0)},
    "net": {_A.TREE: (5.0, 8.5, 14.0), _A.RING: (2.7, 4.0, 14.0), _A.COLLNET_DIRECT: (0.0, 0.0, 31.0),
            _A.COLLNET_CHAIN: (0.0, 0.0, 30.0), _A.NVLS: (0.0, 0.0, 18.0), _A.NVLS_TREE: (0.0, 0.0, 20.9),
            _A.PAT: (0.0, 0.0, 14.0)},
}

#: per-step network overhead floor of a ring across nodes, us: 1.0 on Intel x86 (and other
#: CPUs), 2.0 on AMD x86; x3 for Simple (tuning.cc 226-233, 404-410)
NET_OVERHEAD = {"intel": 1.0, "amd": 2.0, "other": 1.0}
NET_OVERHEAD_SIMPLE_FACTOR = 3.0
#: CollNetDirect's "arity serialization" per extra local GPU, us (tuning.cc 418-421)
COLLNET_ARITY_LATENCY = 0.4
#: PAT's latency terms: the inter-node latency divided by 3.5 per tree level, and 2.8 us per rank
#: ("still a linear part") (tuning.cc 429-434)
PAT_INTER_DIVISOR, PAT_PER_RANK = 3.5, 2.8
#: the ring Simple all-reduce across nodes pays 1.4x its latency (1.9x on Volta) once each rank's
#: share of a channel reaches 64 bytes ("plateau effect of ring", tuning.cc 647-650)
RING_PLATEAU_FACTOR = (1.9, 1.4, 1.4, 1.4)
RING_PLATEAU_BYTES = 64

#: caps on the bus bandwidth of ring LL and tree LL, GB/s, by row (N columns): one node by GPU
#: architecture (rows 0-3 = Volta..Blackwell), several nodes by CPU vendor (row 0 Intel or
#: other, row 1 AMD or mixed) (tuning.cc 178-183, 268-272)
LL_MAX_BW = ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0), (282.0, 90.0, 70.0))
#: per-channel caps, GB/s, per architecture and N (tuning.cc 185-211)
PER_CH_MAX_RING_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7), (40.0, 40.0, 40.0))
PER_CH_MAX_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0), (55.6, 31.67, 20.0))
PER_CH_MAX_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0), (70.0, 42.8, 24.0))
PER_CH_MAX_NVLS_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (0.0, 57.7, 45.5), (0.0, 96.0, 80.0))
#: fraction of NVLink bandwidth NVLS achieves, per architecture (tuning.cc 139-144)
NVLS_EFFICIENCY = (0.0, 0.0, 0.85, 0.74)

#: protocol factors on bus bandwidth (tuning.cc 327-337): ring LL halves it (8 data bytes in 16);
#: ring LL128 and trees take 0.92 ("120.0/128.0" in NCCL's comment); tree LL divides by 3.8; tree
#: LL128 takes 7/9 on one node and 120/128 across nodes; PAT 0.75
RING_LL_FACTOR, RING_LL128_FACTOR, TREE_FACTOR = 0.5, 0.92, 0.92
TREE_LL_DIVISOR = 3.8
TREE_LL128_FACTOR = (7.0 / 9.0, 120.0 / 128.0)
PAT_FACTOR = 0.75
#: CollNetDirect: x0.85 on Hopper and later; all-gather/reduce-scatter use 0.9 of the network
#: (tuning.cc 340-350)
COLLNET_DIRECT_HOPPER_FACTOR, COLLNET_DIRECT_INTER_FACTOR = 0.85, 0.9

#: the tree all-reduce's bandwidth correction by size: index k = floor(log2(bytes / 64)),
#: applied for 0 <= k < 23 (tuning.cc 623-627, 639-642), per protocol
TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9, .9),
)
TREE_CORRECTION_SIZES = 23

# ---- the topology graph's inputs (src/graph/topo.h, topo.cc, search.cc) --------------------

#: NCCL's bandwidth of one NVLink, GB/s, by compute capability (topo.h 19-24, selected by
#: ncclTopoNVLinkBw, topo.h 274-282): its achievable figure, ~82% of the 25 GB/s wire rate
NVLINK_LINK_BW = {6.0: 18.0, 7.0: 20.0, 8.0: 20.0, 8.6: 12.0, 9.0: 20.6, 10.0: 40.1}


def nvlink_link_bw(cc: float) -> float:
    """NCCL's bandwidth of one NVLink for compute capability ``cc``, GB/s (topo.h 19-24,
    ncclTopoNVLinkBw topo.h 274-282): sm86 its own row, otherwise the newest row at or below."""
    if cc == 8.6:
        return NVLINK_LINK_BW[8.6]
    known = [k for k in NVLINK_LINK_BW if k != 8.6 and k <= cc]
    return NVLINK_LINK_BW[max(known)] if known else NVLINK_LINK_BW[6.0]


#: PCIe x16 bandwidth, GB/s, by generation: width x code / 80 with codes 60/120/240/480 for
#: Gen3..Gen6 (topo.cc 545-556, 650-658)
PCIE_X16_BW = {3: 12.0, 4: 24.0, 5: 48.0, 6: 96.0}

#: per-channel speeds the graph search tries, GB/s, from the top (search.cc 1051-1067):
#: one node (intra) and with the network (inter), for <sm90, sm90 and sm100
SPEEDS_INTRA = {
    "pre90": (40.0, 30.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0),
    "sm90": (60.0, 50.0, 40.0, 30.0, 24.0, 20.0, 15.0, 12.0, 11.0, 6.0, 3.0),
    "sm100": (90.0, 80.0, 70.0, 60.0, 50.0, 45.0, 40.0, 30.0, 24.0, 20.0, 19.0, 18.0),
}
SPEEDS_INTER = {
    "pre90": (48.0, 30.0, 28.0, 24.0, 20.0, 18.0, 15.0, 12.0, 10.0, 9.0, 7.0, 6.0, 5.0, 4.0, 3.0,
              2.4, 1.2, 0.24, 0.12),
    "sm90": (48.0, 45.0, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0, 6.0, 3.0, 2.4, 1.2,
             0.24, 0.12),
    "sm100": (96.0, 86.0, 80.0, 48.0, 45.1, 42.0, 40.0, 30.0, 24.0, 22.0, 20.0, 17.5, 15.0, 12.0,
              6.0, 3.0, 2.4, 1.2, 0.24, 0.12),
}
#: channel duplication after the search: channels x2 (bandwidth halved) when the speed is at
#: least 25 GB/s, unless the GPU is newer than sm80, the speed below 50 and channels above 4
#: (search.cc 1036-1049); ring search channels at most 32 (init.cc 1175-1178); NVLS channels at
#: most min(32, GPUs) (search.cc 1126-1138)
DUP_MIN_BW, DUP_SKIP_BW, DUP_SKIP_CHANNELS = 25.0, 50.0, 4
MAX_SEARCH_CHANNELS = 32
MAX_NVLS_CHANNELS = 32
