"""NCCL's cost model: the latency and bandwidth of every (algorithm, protocol) pair it can run.

Our own code following NCCL's published tuning model (src/graph/tuning.cc of v2.30.7-1, the
equations in docs/collectives.md; constants in :mod:`.tables`). For a collective of
``S`` bytes (nccl-tests size) NCCL predicts, per pair,

    time = L + S / B    (L: latency, B: algorithm bandwidth)

with two size-dependent corrections: the tree all-reduce's bandwidth is scaled by a factor per
power of two of the size (tuning.cc 623-627), and a ring Simple all-reduce across nodes pays
1.4x its latency once each rank's share of a channel reaches 64 bytes (tuning.cc 647-650).
NCCL runs the pair with the least predicted time (ties to the earlier algorithm, then
protocol). all_to_all and send/recv are point-to-point in NCCL and not in its model; for them
:func:`nccl_costs` returns one ``P2P`` entry following NCCL's p2p schedule (:mod:`.p2p`: the
channels a send uses grow with its size, so its bandwidth is a function of the size).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from willitscale.collectives.nccl import tables as T
from willitscale.collectives.nccl.p2p import P2pLadder, p2p_ladder
from willitscale.collectives.nccl.system import Graph, Graphs, NcclSystem, search_graphs
from willitscale.collectives.nccl.tables import NcclAlgorithm as A
from willitscale.collectives.nccl.tables import Protocol as P
from willitscale.collectives.ops import Op

__all__ = ["PairCost", "nccl_costs", "pair_times"]

US = 1e-6
GB = 1e9


@dataclass(frozen=True, slots=True, kw_only=True)
class PairCost:
    """NCCL's model of one (algorithm, protocol): ``time(S) = latency + S / bandwidth``, with
    the tree correction and the ring plateau when they apply. SI units."""

    algorithm: A
    protocol: P
    latency: float  #: seconds
    bandwidth: float  #: algorithm bandwidth, bytes/s
    plugin_latency: float = 0.0  #: seconds of ``latency`` that are the net plugin's reported latency
    channels: int  #: search channels of its graph
    tree_correction: int = 0  #: sizes (powers of two from 64 B) the tree correction covers; 0: none
    plateau_bytes: float = math.inf  #: from this size on the latency is x plateau_factor
    plateau_factor: float = 1.0
    #: point-to-point only: NCCL's channels per send by size (``bandwidth`` is then the
    #: saturated figure, every channel of a peer in use; :func:`pair_times` uses the ladder)
    ladder: P2pLadder | None = None

    ll_latency: float = 0.0  #: point-to-point only: seconds when a send goes by LL
    ll_plugin_latency: float = 0.0  #: point-to-point only: the plugin's share of ``ll_latency``

    def latency_at(self, size) -> tuple[np.ndarray, np.ndarray]:
        """(latency, its plugin share), seconds, per size: x plateau_factor from plateau_bytes
        on; a point-to-point send small enough for LL pays LL's latency."""
        size = np.asarray(size, dtype=float)
        on = size >= self.plateau_bytes
        latency = np.where(on, self.latency * self.plateau_factor, self.latency)
        plugin = np.where(on, self.plugin_latency * self.plateau_factor, self.plugin_latency)
        if self.ladder is not None:
            ll = self.ladder.is_ll(size)
            latency = np.where(ll, self.ll_latency, latency)
            plugin = np.where(ll, self.ll_plugin_latency, plugin)
        return latency, plugin

    @property
    def name(self) -> str:
        return f"{self.algorithm.value}/{self.protocol.label}"

    def time(self, size):
        """Seconds for ``size`` bytes (numpy arrays broadcast)."""
        return pair_times((self,), size)[0]


def _ncol(nodes: int) -> int:
    return 0 if nodes == 1 else 1 if nodes == 2 else 2


def _steps(op: Op, n: int) -> int:
    return 2 * (n - 1) if op is Op.ALL_REDUCE else n - 1 if op in (Op.ALL_GATHER, Op.REDUCE_SCATTER) else n


def _algorithms(op: Op, s: NcclSystem, g: Graphs) -> list[A]:
    """The algorithms NCCL considers for ``op`` here (tuning.cc 294-304, 495-512; enqueue.cc
    1989-2012), in NCCL's order."""
    N, ppn = s.nodes, s.ranks_per_node
    collnet = s.collnet and N >= 2 and s.nvswitch and ppn <= 8
    out = [A.RING]
    if op is Op.ALL_REDUCE:
        out.append(A.TREE)
        if collnet:
            out += [A.COLLNET_DIRECT, A.COLLNET_CHAIN]
        if g.nvls is not None and (N == 1 or s.collnet):
            out.append(A.NVLS)
        if g.nvls is not None and N > 1:
            out.append(A.NVLS_TREE)
    elif op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        if g.nvls is not None and ppn <= 32 and (N == 1 or s.collnet):
            out.append(A.NVLS)
        if ppn == 1 and N > 1 and s.compute_capability >= 6.0:
            out.append(A.PAT)
    return sorted(out, key=list(A).index)


def _protocols(a: A, s: NcclSystem) -> list[P]:
    """Simple always; LL and LL128 for ring and tree only, LL128 only with NVLink inside the
    node and compute capability >= 7.0 (tuning.cc 514-541); neither where the network cannot
    deliver them in order (``simple_only``)."""
    if a not in (A.RING, A.TREE) or s.simple_only:
        return [P.SIMPLE]
    out = [P.LL]
    if s.intra == "nvlink" and s.compute_capability >= 7.0:
        out.append(P.LL128)
    return out + [P.SIMPLE]


def _graph(a: A, g: Graphs) -> Graph:
    if a in (A.NVLS, A.NVLS_TREE):
        return g.nvls
    return g.ring if a is A.RING else g.tree


def _bus_bw(op: Op, a: A, p: P, s: NcclSystem, g: Graphs) -> float:
    """NCCL's internal bus bandwidth of the pair, GB/s (tuning.cc 305-374)."""
    N, ppn, arch, col = s.nodes, s.ranks_per_node, s.arch, _ncol(s.nodes)
    graph = _graph(a, g)
    bw = graph.bw_intra if N <= 2 or a in (A.COLLNET_DIRECT, A.COLLNET_CHAIN) else graph.bw_inter
    if a in (A.NVLS, A.NVLS_TREE):
        share = 2.0 if op is Op.ALL_REDUCE else (ppn - 1) / ppn
        intra = graph.bw_intra * T.NVLS_EFFICIENCY[arch] * (graph.channels - 1) / graph.channels * share
        inter = graph.bw_inter * (2.0 if a is A.NVLS_TREE and N <= 2 else 1.0)
        bw = min(intra, inter)
        if a is A.NVLS_TREE:
            bw = min(bw, T.PER_CH_MAX_NVLS_TREE[arch][col])
    bus = graph.channels * bw
    ll_row = arch if N == 1 else (1 if s.cpu == "amd" else 0)
    ll_max = T.LL_MAX_BW[ll_row][col]
    if a is A.RING and p is P.LL:
        bus = min(ll_max, bus * T.RING_LL_FACTOR)
    elif a is A.RING and p is P.LL128:
        bus = min(bus * T.RING_LL128_FACTOR, graph.channels * T.PER_CH_MAX_RING_LL128[arch][col])
    elif a is A.TREE:
        bus = min(bus * T.TREE_FACTOR, graph.channels * T.PER_CH_MAX_TREE[arch][col])
        if p is P.LL:
            bus = min(bus / T.TREE_LL_DIVISOR, ll_max)
        elif p is P.LL128:
            bus = min(bus * T.TREE_LL128_FACTOR[N > 1], graph.channels * T.PER_CH_MAX_TREE_LL128[arch][col])
    elif a is A.PAT:
        bus *= T.PAT_FACTOR
    elif a is A.COLLNET_DIRECT:
        f = ppn / graph.channels
        bus /= (f + 1) / 2
        if arch >= T.Arch.HOPPER:
            bus *= T.COLLNET_DIRECT_HOPPER_FACTOR
    return bus


def _alg_bw(op: Op, a: A, bus: float, n: int) -> float:
    """The algorithm bandwidth NCCL divides the size by (tuning.cc 376-383)."""
    if a in (A.TREE, A.COLLNET_DIRECT, A.COLLNET_CHAIN):
        return bus * 0.5
    if a is A.PAT or (a is A.NVLS and op in (Op.ALL_GATHER, Op.REDUCE_SCATTER)):
        return bus
    return bus * n / _steps(op, n)


def _latency(op: Op, a: A, p: P, s: NcclSystem) -> float:
    """NCCL's latency of the pair, us (tuning.cc 384-435)."""
    N, ppn, n = s.nodes, s.ranks_per_node, s.ranks
    intra_hw = "nvlink" if s.intra == "nvlink" else "pci"
    base = T.BASE_LATENCY[a][p]
    intra = T.HW_LATENCY[intra_hw][a][p]
    inter = T.HW_LATENCY["net"][A.TREE if ppn == 1 else a][p] + s.net_latency_us * (2 if p is P.SIMPLE else 1)
    log_n = math.floor(math.log2(N))
    if a is A.RING:
        if op in (Op.BROADCAST, Op.REDUCE):
            return base + (intra if N == 1 else T.HW_LATENCY["net"][a][p])
        steps = _steps(op, n)
        inter_steps = 0 if N == 1 else (2 * (N - 1) if op is Op.ALL_REDUCE else N - 1)
        per_step = intra
        if N > 1:
            overhead = T.NET_OVERHEAD[s.cpu] * (T.NET_OVERHEAD_SIMPLE_FACTOR if p is P.SIMPLE else 1.0)
            per_step = max(intra, overhead)
        return base + (steps - inter_steps) * per_step + inter_steps * inter
    if a is A.TREE:
        return base + 2 * ((ppn - 1) * intra + log_n * inter)
    if a is A.COLLNET_DIRECT:
        return base + 2 * (min(1, ppn - 1) * intra + (ppn - 1) * T.COLLNET_ARITY_LATENCY) + inter
    if a is A.COLLNET_CHAIN:
        return base + 2 * (ppn - 1) * intra + inter
    if a is A.NVLS:
        return intra + (inter if N > 1 else 0.0)
    if a is A.NVLS_TREE:
        return base + intra + 2 * log_n * inter
    return base + log_n * inter / T.PAT_INTER_DIVISOR + n * T.PAT_PER_RANK  # PAT


def _pair(op: Op, a: A, p: P, s: NcclSystem, g: Graphs) -> PairCost | None:
    bus = _bus_bw(op, a, p, s, g)
    if not bus > 0:
        return None
    plateau_bytes, plateau = math.inf, 1.0
    if a is A.RING and p is P.SIMPLE and op is Op.ALL_REDUCE and s.nodes > 1:
        plateau_bytes = T.RING_PLATEAU_BYTES * g.runtime_channels * s.ranks
        plateau = T.RING_PLATEAU_FACTOR[s.arch]
    correction = 0
    if op is Op.ALL_REDUCE and a is A.TREE:
        correction = T.TREE_CORRECTION_SIZES
    elif (op is Op.ALL_REDUCE and a is A.NVLS_TREE and s.arch >= T.Arch.BLACKWELL
          and s.cpu in ("intel", "amd")):
        correction = T.TREE_CORRECTION_SIZES + 1  # tuning.cc 643-646
    latency = _latency(op, a, p, s)
    plugin = latency - _latency(op, a, p, replace(s, net_latency_us=0.0)) if s.net_latency_us else 0.0
    return PairCost(algorithm=a, protocol=p, latency=latency * US, plugin_latency=plugin * US,
                    bandwidth=_alg_bw(op, a, bus, s.ranks) * GB, channels=_graph(a, g).channels,
                    tree_correction=correction, plateau_bytes=plateau_bytes, plateau_factor=plateau)


def _ladder(s: NcclSystem, g: Graphs, *, one_node: bool = False) -> P2pLadder:
    """NCCL's p2p schedule of ``s``'s communicator; ``one_node``: of its ranks on one node (the
    sends between peers on one node, which never touch the network)."""
    N, ppn = (1, s.ranks_per_node) if one_node else (s.nodes, s.ranks_per_node)
    local_nics = max(1, int(s.net_devices // ppn)) if N > 1 else 0
    return p2p_ladder(ranks=s.ranks if N > 1 else ppn, nodes=N, runtime_channels=g.runtime_channels,
                      intra=s.intra,
                      path_GBps=s.path_bandwidth_GBps,
                      nvlink_GBps=s.nvlink_GBps or T.nvlink_link_bw(s.compute_capability),
                      local_nics=local_nics, nic_GBps=s.net_device_GBps, pcie_GBps=s.pcie_GBps,
                      arm_sm100=s.cpu == "other" and s.compute_capability >= 10.0, env=s.env)


def _p2p(op: Op, s: NcclSystem, g: Graphs) -> PairCost:
    """NCCL's point-to-point ops (NCCL does not cost them): one round at the ring Simple base
    latency plus one hop (NVLink/PCIe inside a node, the network's across) -- our own choice,
    NCCL has no p2p latency -- at the bandwidth of NCCL's p2p schedule (:mod:`.p2p`).
    send/recv: one send's ladder (channels by size). all_to_all moves ``(n-1)/n`` of a rank's
    buffer, every peer at once on its own channels (NCCL gives each peer ``nChannelsMin``
    channels so that all fit, enqueue.cc 1143-1146), so the ``(ppn - 1) / n`` of it that stays
    on the node runs at the saturated p2p bandwidth of a node's own schedule (NVLink/PCIe, no
    network setting applies); across nodes the node's devices carry ``ppn (n - ppn) / n``."""
    n, ppn, N = s.ranks, s.ranks_per_node, s.nodes
    kind = "nvlink" if s.intra == "nvlink" else "pci"
    hop = T.HW_LATENCY[kind][A.RING][P.SIMPLE]
    ll_hop = T.HW_LATENCY[kind][A.RING][P.LL]
    if N > 1:
        hop = T.HW_LATENCY["net"][A.RING][P.SIMPLE] + 2 * s.net_latency_us
        ll_hop = T.HW_LATENCY["net"][A.RING][P.LL] + s.net_latency_us
    latency = (T.BASE_LATENCY[A.RING][P.SIMPLE] + hop) * US
    plugin = 2 * s.net_latency_us * US if N > 1 else 0.0
    ladder = _ladder(s, g)
    if op is Op.SEND_RECV:
        return PairCost(algorithm=A.P2P, protocol=P.SIMPLE, latency=latency, bandwidth=ladder.saturated,
                        plugin_latency=plugin, channels=ladder.channels_max, ladder=ladder,
                        ll_latency=(T.BASE_LATENCY[A.RING][P.LL] + ll_hop) * US,
                        ll_plugin_latency=s.net_latency_us * US if N > 1 else 0.0)
    devices = max(s.net_devices, 1e-9) * min(s.net_device_GBps, s.pcie_GBps) * GB
    inside = 0.0  # seconds per byte of a buffer; one rank per node keeps nothing on its node
    if ppn > 1:
        inside = (ppn - 1) / n / (ladder if N == 1 else _ladder(s, g, one_node=True)).saturated
    across = ppn * (n - ppn) / n / devices if N > 1 else 0.0
    per_byte = max(inside, across, 1e-30)
    return PairCost(algorithm=A.P2P, protocol=P.SIMPLE, latency=latency, bandwidth=1.0 / per_byte,
                    plugin_latency=plugin, channels=ladder.channels_max)


def nccl_costs(op: Op, system: NcclSystem, graphs: Graphs | None = None) -> tuple[PairCost, ...]:
    """Every (algorithm, protocol) NCCL would consider for ``op`` on ``system``, in its order.
    One rank: nothing moves (an empty tuple)."""
    op = Op(op)
    if system.ranks == 1:
        return ()
    g = search_graphs(system) if graphs is None else graphs
    if op in (Op.ALL_TO_ALL, Op.SEND_RECV):
        return (_p2p(op, system, g),)
    out = []
    for a in _algorithms(op, system, g):
        for p in _protocols(a, system):
            pair = _pair(op, a, p, system, g)
            if pair is not None:
                out.append(pair)
    return tuple(out)


def _correction(pair: PairCost, size):
    k = np.floor(np.log2(np.maximum(size, 1.0) / 64.0))
    table = np.asarray(T.TREE_CORRECTION[pair.protocol] + (1.0,), dtype=float)
    idx = np.where((k >= 0) & (k < pair.tree_correction), np.clip(k, 0, len(table) - 1), len(table) - 1)
    return table[idx.astype(int)]


def pair_times(pairs, size) -> np.ndarray:
    """NCCL's predicted seconds per pair (rows) and size (trailing shape of ``size``)."""
    size = np.asarray(size, dtype=float)
    rows = []
    for pair in pairs:
        latency = pair.latency_at(size)[0]
        if pair.ladder is not None:
            bw = pair.ladder.bandwidth(size)
        else:
            bw = pair.bandwidth * (_correction(pair, size) if pair.tree_correction else 1.0)
        rows.append(latency + size / bw)
    return np.stack(rows) if rows else np.zeros((0,) + size.shape)
