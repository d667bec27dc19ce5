"""NCCL's candidates as collective lines: one column per (algorithm, protocol) it can run.

For every distinct group geometry (ranks, ranks per node, share of the node's NICs) of a batch
of plans, :func:`nccl_lines` builds the communicator NCCL would see on the cluster's catalog node
(:func:`~willitscale.collectives.nccl_node.nccl_system`), costs every pair with NCCL's model
(:func:`~willitscale.collectives.nccl.model.nccl_costs`, cached per communicator) and writes its
latency, inverse bandwidth, plateau and plugin latency into the pair's column; pairs that cannot
run there are disabled (infinite intercept). The per-column constants carry the achieved-time
corrections of :data:`~willitscale.collectives.nccl.run.ACHIEVED` (one process per GPU, as PyTorch).

What-ifs that scale a level's bandwidth (``estimate`` levers, ``requirements``) scale NCCL's
inputs (each GPU's NVLink, or the network devices) and search the graphs again. A faster NIC
keeps the GPU's PCIe link: the what-if is the node rebuilt with that NIC (the figure
``requirements`` prints must hold on such a node, tests/report/test_report_bandwidth_agrees.py):
the answer moves in NCCL's steps (its list of per-channel speeds, at most 32 channels), so a
faster link helps only once it lets the search pick a faster speed or more channels.
"""

from __future__ import annotations

import math
from dataclasses import replace
from functools import lru_cache

import numpy as np

from willitscale.collectives.line_time import CollectiveLines, LineTerms
from willitscale.collectives.nccl.model import nccl_costs
from willitscale.collectives.nccl.run import ACHIEVED
from willitscale.collectives.nccl.system import NcclSystem
from willitscale.collectives.nccl.tables import NcclAlgorithm, Protocol
from willitscale.collectives.nccl_node import nccl_system
from willitscale.collectives.ops import Op

__all__ = ["nccl_lines", "candidate_columns"]

A, P = NcclAlgorithm, Protocol
_RT = (P.LL, P.LL128, P.SIMPLE)


def candidate_columns(op: Op) -> tuple[tuple[NcclAlgorithm, Protocol], ...]:
    """Every pair NCCL may consider for ``op``, in its order (algorithm index, then protocol)."""
    op = Op(op)
    if op in (Op.ALL_TO_ALL, Op.SEND_RECV):
        return ((A.P2P, P.SIMPLE),)
    if op is Op.ALL_REDUCE:
        algorithms = (A.TREE, A.RING, A.COLLNET_DIRECT, A.COLLNET_CHAIN, A.NVLS, A.NVLS_TREE)
    elif op in (Op.ALL_GATHER, Op.REDUCE_SCATTER):
        algorithms = (A.RING, A.NVLS, A.PAT)
    else:
        algorithms = (A.RING,)
    return tuple((a, p) for a in algorithms for p in (_RT if a in (A.TREE, A.RING) else (P.SIMPLE,)))


@lru_cache(maxsize=4096)
def _costs(op: Op, system: NcclSystem):
    return {(c.algorithm, c.protocol): c for c in nccl_costs(op, system)}


def _system(node, n: int, ppn: int, share: float, scale: tuple[float, float]) -> NcclSystem:
    ppn = math.gcd(n, ppn) if n % ppn else ppn  # an uneven group: its largest even split
    system = nccl_system(node, ranks=n, ranks_per_node=ppn, net_share=share if n > ppn else None)[0]
    intra, inter = scale
    if intra == 1.0 and inter == 1.0:
        return system
    return replace(system, gpu_bandwidth_GBps=system.gpu_bandwidth_GBps * intra,
                   path_bandwidth_GBps=system.path_bandwidth_GBps * intra,
                   net_device_GBps=system.net_device_GBps * inter)


def _terms(columns, plateau_factor, correction_sizes) -> LineTerms:
    a = ACHIEVED
    return LineTerms(
        plateau_factor=plateau_factor,
        correction=np.array([int(p) if sizes else -1 for (_, p), sizes in zip(columns, correction_sizes)]),
        correction_sizes=correction_sizes.astype(int),
        latency_factor=np.array([a.latency_factor[p] for _, p in columns]),
        plugin_factor=np.full(len(columns), a.plugin_latency_factor),
        inv_efficiency=np.array([1.0 / a.efficiency(al) for al, _ in columns]),
        ramp=np.full(len(columns), a.ramp), width=np.full(len(columns), a.ramp_width))


def nccl_lines(op: Op, unique: np.ndarray, inverse: np.ndarray, links) -> CollectiveLines:
    """Lines of ``op`` for the distinct geometries ``unique`` (rows: members per node or 0 inside
    one node, group size, NIC share, a plan's intra and inter bandwidth factors) expanded to
    plans by ``inverse``."""
    columns = candidate_columns(op)
    shape = (len(unique), len(columns))
    intercept, slope = np.full(shape, np.inf), np.zeros(shape)
    plateau, plugin = np.full(shape, np.inf), np.zeros(shape)
    factor, corrections = np.ones(len(columns)), np.zeros(len(columns))
    for i, (key, size, share, intra, inter) in enumerate(unique):
        n = int(size)
        if n <= 1:
            intercept[i, 0] = 0.0
            continue
        system = _system(links.node, n, int(key) if key > 0 else n, float(share),
                         links.scale_at(float(intra), float(inter)))
        costs = _costs(op, system)
        for j, pair in enumerate(columns):
            c = costs.get(pair)
            if c is None:
                continue
            intercept[i, j], slope[i, j] = c.latency, 1.0 / c.bandwidth
            plateau[i, j], plugin[i, j] = c.plateau_bytes, c.plugin_latency
            factor[j] = c.plateau_factor if math.isfinite(c.plateau_bytes) else factor[j]
            corrections[j] = max(corrections[j], c.tree_correction)
    used = np.isfinite(intercept).any(axis=0)
    used[0] = True  # keeps the zero column of one-rank groups
    keep = np.nonzero(used)[0]
    kept = tuple(columns[j] for j in keep)
    terms = _terms(kept, factor[keep], corrections[keep])
    return CollectiveLines(
        op=op.value, algorithms=tuple(f"{a.value}/{p.label}" for a, p in kept), tolerance=0.0,
        intercept=intercept[:, keep], slope=slope[:, keep], plateau=plateau[:, keep],
        plugin=plugin[:, keep], terms=terms, geometry=inverse)
