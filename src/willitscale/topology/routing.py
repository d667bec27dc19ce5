"""Routing: which links each flow uses, and what fraction of its bytes goes over each.

* A flow between two GPUs of one server goes GPU -> NVSwitch -> GPU.
* Between servers it goes GPU -> NIC link -> switches -> NIC link -> GPU over *minimal* (fewest
  hops) switch paths. Which of the equal-cost next hops it takes at each switch:

  - ``ecmp``: one, chosen by a hash of (seed, src GPU, dst GPU, flow key, switch) - a per-flow
    hash, so a flow keeps its path for its whole life and successive steps between the same
    pair (one NCCL connection) reuse it;
  - ``spray``: all of them, the bytes split evenly at every switch (per-packet spraying);
  - ``adaptive``: the least-loaded one (fewest flows per byte/s of capacity) when the flow
    starts, counting the flows already in flight; ties broken by the hash. Greedy per hop and
    by flow count: a switch sees only its own next links, so evening out one hop can overload a
    link further on, and adaptive can do worse than ECMP (docs/fabric.md has a dragonfly case).

* ``pxn`` (rail-aware, NCCL's PXN): a flow to another server on a different rail first moves
  over NVLink to the sender-side GPU on the destination's rail, then crosses the network on
  that rail. Rail-only fabrics always route this way.

Equal-cost next hops come from a BFS over the switch graph towards each destination switch
(cached per destination), so no path is ever enumerated: spraying propagates the split level
by level, ECMP walks all flows of one destination at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from willitscale.errors import ConfigError
from willitscale.topology.graph import Topology, VertexKind

__all__ = ["Balance", "Routing", "ROUTINGS", "parse_routing", "LinkMatrix", "Routes", "Router", "flow_hash"]


class Balance(StrEnum):
    ECMP = "ecmp"
    SPRAY = "spray"
    ADAPTIVE = "adaptive"


@dataclass(frozen=True, slots=True, kw_only=True)
class Routing:
    """How flows are spread: a load-balancing scheme, rail-aware or not, and the hash seed."""

    balance: Balance = Balance.ECMP
    pxn: bool = False
    seed: int = 0

    def __post_init__(self) -> None:
        object.__setattr__(self, "balance", Balance(self.balance))

    @property
    def name(self) -> str:
        return "rail" if self.pxn and self.balance is Balance.ECMP else \
            self.balance.value + ("+pxn" if self.pxn else "")


#: The CLI's ``--routing`` names. ``rail`` = rail-aware (PXN) with ECMP for the spine part.
ROUTINGS = {
    "ecmp": (Balance.ECMP, False),
    "spray": (Balance.SPRAY, False),
    "adaptive": (Balance.ADAPTIVE, False),
    "rail": (Balance.ECMP, True),
}


def parse_routing(name: str, *, seed: int = 0, pxn: bool = False) -> Routing:
    """A :class:`Routing` from ``ecmp``, ``spray``, ``adaptive`` or ``rail`` (+ ``pxn`` flag)."""
    key = str(name).strip().lower()
    if key not in ROUTINGS:
        raise ConfigError("routing", name, "one of " + ", ".join(ROUTINGS))
    balance, rail = ROUTINGS[key]
    return Routing(balance=balance, pxn=rail or pxn, seed=seed)


#: destinations searched together (one bit each): 256 x 8 bytes per switch at a time
_DIST_BATCH = 256

_M1, _M2, _GOLD = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB), np.uint64(0x9E3779B97F4A7C15)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a well-spread 64-bit hash of each element."""
    with np.errstate(over="ignore"):
        x = (x + _GOLD).astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * _M1
        x = (x ^ (x >> np.uint64(27))) * _M2
        return x ^ (x >> np.uint64(31))


def flow_hash(seed: int, *parts: np.ndarray) -> np.ndarray:
    """A deterministic per-element 64-bit hash of ``seed`` and the integer arrays ``parts``."""
    h = _mix(np.full(np.shape(parts[0]), seed, dtype=np.uint64))
    for p in parts:
        with np.errstate(over="ignore"):
            h = _mix(h ^ np.asarray(p).astype(np.uint64))
    return h


@dataclass(frozen=True, slots=True)
class Routes:
    """Sparse flow-by-link incidence: entry i says flow ``flow[i]`` puts ``frac[i]`` of its
    bytes on ``link[i]``; ``latency[f]`` is flow f's path latency (split-weighted for spray)."""

    flow: np.ndarray
    link: np.ndarray
    frac: np.ndarray
    latency: np.ndarray

    def matrix(self, n_links: int) -> LinkMatrix:
        """The (flows x links) incidence in CSR form, links ascending within a flow; duplicate
        entries are summed (by scipy, in its order: the same arrays as ``scipy.sparse.csr_matrix``
        gives, without importing scipy - ~0.15 s - when no (flow, link) pair repeats)."""
        n = self.latency.size
        order = np.lexsort((self.link, self.flow))
        flow, link = self.flow[order], self.link[order]
        if flow.size > 1 and np.any((flow[1:] == flow[:-1]) & (link[1:] == link[:-1])):
            from scipy.sparse import csr_matrix

            m = csr_matrix((self.frac, (self.flow, self.link)), shape=(n, n_links))
            return LinkMatrix(indptr=m.indptr, indices=m.indices, data=m.data, shape=(n, n_links))
        indptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(flow, minlength=n), out=indptr[1:])
        return LinkMatrix(indptr=indptr, indices=link, data=self.frac[order], shape=(n, n_links))


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkMatrix:
    """A (flows x links) matrix in CSR arrays, as ``scipy.sparse.csr_matrix`` holds them: flow
    ``f``'s entries are ``indptr[f]:indptr[f + 1]`` of ``indices`` (links) and ``data``
    (fractions of its bytes)."""

    indptr: np.ndarray
    indices: np.ndarray
    data: np.ndarray
    shape: tuple[int, int]

    def __post_init__(self) -> None:
        if self.indptr.size != self.shape[0] + 1 or self.indices.size != self.data.size:
            raise ConfigError("link matrix", f"{self.indptr.size} row pointers, {self.indices.size} links, "
                              f"{self.data.size} fractions", f"{self.shape[0] + 1} row pointers and as many "
                              "fractions as links")


class Router:
    """Routes flows on one topology; caches hop distances to each destination switch."""

    def __init__(self, topology: Topology):
        t = self.topology = topology
        self.nic_up, self.nic_down = t.nic_links()
        self.nvl_up, self.nvl_down = t.nvlink_links()
        self.gpu_switch = np.where(self.nic_up >= 0, t.link_dst[np.maximum(self.nic_up, 0)], -1)
        is_sw = t.vertex_kind == VertexKind.SWITCH
        switches = np.flatnonzero(is_sw)
        self._sw = np.full(t.vertices, -1, dtype=np.int64)  # vertex -> switch number
        self._sw[switches] = np.arange(switches.size)
        links = np.flatnonzero(is_sw[t.link_src] & is_sw[t.link_dst])
        links = links[np.argsort(t.link_src[links], kind="stable")]  # by source, then link number
        self._out = links  #: switch-to-switch links grouped by source switch
        self._out_ptr = np.zeros(switches.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(self._sw[t.link_src[links]], minlength=switches.size), out=self._out_ptr[1:])
        self._out_dst = self._sw[t.link_dst[links]]
        self._dist: dict[int, np.ndarray] = {}
        self._spray: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    # -- next-hop tables -------------------------------------------------------------
    def distances(self, targets) -> list[np.ndarray]:
        """Hops from every switch (by switch number) to each switch vertex of ``targets``
        (-1: unreachable), all at once: a breadth-first search backwards from every target
        together, one bit per target, so the switch links are swept once per hop, not once
        per hop per target. Cached per target."""
        targets = [int(x) for x in targets]
        todo = sorted({x for x in targets if x not in self._dist})
        for first in range(0, len(todo), _DIST_BATCH):
            batch = todo[first:first + _DIST_BATCH]
            for x, d in zip(batch, self._search(self._sw[np.asarray(batch)])):
                self._dist[x] = d
        return [self._dist[x] for x in targets]

    def _search(self, targets: np.ndarray) -> np.ndarray:
        """Rows: hop distances (int32, -1 unreachable) from every switch to each of ``targets``."""
        n, k = self._out_ptr.size - 1, targets.size
        words = (k + 63) // 64
        reach = np.zeros((n, words), dtype=np.uint64)  # bit j: reaches target j in <= hops
        bytes_ = reach.view(np.uint8)
        col = np.arange(k)
        bytes_[targets, col // 8] |= (1 << (col % 8)).astype(np.uint8)
        dist = np.full((k, n), -1, dtype=np.int32)
        dist[col, targets] = 0
        has_out = np.flatnonzero(np.diff(self._out_ptr) > 0)
        starts = self._out_ptr[has_out]
        hops = 0
        while True:
            hops += 1
            new = reach.copy()
            for w in range(words):  # one word column at a time keeps the gathered array small
                new[has_out, w] |= np.bitwise_or.reduceat(reach[self._out_dst, w], starts)
            fresh = new & ~reach
            if not fresh.any():
                return dist
            sw, j = np.nonzero(np.unpackbits(fresh.view(np.uint8), axis=1, bitorder="little")[:, :k])
            dist[j, sw] = hops
            reach = new

    def next_hops(self, switches: np.ndarray, dist: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The links one hop closer (``dist``: from :meth:`distances`) out of each of
        ``switches`` (vertices): ``(ptr, links)``, switch ``i``'s in ``links[ptr[i]:ptr[i+1]]``,
        in order of link number."""
        sw = self._sw[switches]
        starts, ends = self._out_ptr[sw], self._out_ptr[sw + 1]
        counts = ends - starts
        total = int(counts.sum())
        pos = np.arange(total) + np.repeat(starts - (np.cumsum(counts) - counts), counts)
        owner = np.repeat(np.arange(sw.size), counts)
        ok = dist[self._out_dst[pos]] == dist[sw][owner] - 1
        ptr = np.zeros(sw.size + 1, dtype=np.int64)
        np.cumsum(np.bincount(owner[ok], minlength=sw.size), out=ptr[1:])
        return ptr, self._out[pos[ok]]

    def hops_to(self, target: int, switches: np.ndarray) -> np.ndarray:
        """Hops from each of ``switches`` (vertices) to switch ``target`` (-1: unreachable)."""
        return self.distances([target])[0][self._sw[np.asarray(switches, dtype=np.int64)]]

    def spray_split(self, source: int, target: int) -> tuple[np.ndarray, np.ndarray]:
        """Links and byte fractions of a flow sprayed evenly at every hop from ``source``."""
        key = (source, target)
        if key in self._spray:
            return self._spray[key]
        t = self.topology
        dist = self.distances([target])[0]
        mass = {source: 1.0}
        out_links, out_frac = [], []
        for _ in range(int(dist[self._sw[source]])):
            nxt: dict[int, float] = {}
            us = np.fromiter(mass, dtype=np.int64, count=len(mass))
            ptr, links = self.next_hops(us, dist)
            for i, m in enumerate(mass.values()):
                opts = links[ptr[i]:ptr[i + 1]]
                share = m / opts.size
                out_links.append(opts)
                out_frac.append(np.full(opts.size, share))
                for v in t.link_dst[opts].tolist():
                    nxt[v] = nxt.get(v, 0.0) + share
            mass = nxt
        res = (np.concatenate(out_links) if out_links else np.zeros(0, np.int64),
               np.concatenate(out_frac) if out_frac else np.zeros(0))
        self._spray[key] = res
        return res

    # -- routing -------------------------------------------------------------------------
    def route(self, src: np.ndarray, dst: np.ndarray, key: np.ndarray, routing: Routing,
              load: np.ndarray | None = None) -> Routes:
        """Routes of flows ``src[i] -> dst[i]`` (GPU indices); ``key`` tells flows of one pair
        apart for hashing (e.g. NCCL channel). ``load`` (flows per link in flight) feeds adaptive."""
        t = self.topology
        src, dst, key = (np.asarray(a, dtype=np.int64) for a in (src, dst, key))
        if np.any(src == dst):
            raise ConfigError("flow", "a GPU sending to itself", "flows between distinct GPUs")
        n = src.size
        parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        latency = np.zeros(n)
        intra = t.gpu_node[src] == t.gpu_node[dst]
        f = np.flatnonzero(intra)
        if f.size:
            self._add_fixed(parts, latency, f, self.nvl_up[src[f]], 1.0)
            self._add_fixed(parts, latency, f, self.nvl_down[dst[f]], 1.0)
        inter = np.flatnonzero(~intra)
        sender = src.copy()
        if inter.size and (routing.pxn or t.requires_pxn):
            move = inter[t.gpu_local[src[inter]] != t.gpu_local[dst[inter]]]
            mid = t.gpu_node[src[move]] * t.gpus_per_node + t.gpu_local[dst[move]]
            if move.size and np.any(self.nvl_up[src[move]] < 0):
                raise ConfigError("routing", "pxn", "servers with an NVSwitch (gpus_per_node > 1)")
            self._add_fixed(parts, latency, move, self.nvl_up[src[move]], 1.0)
            self._add_fixed(parts, latency, move, self.nvl_down[mid], 1.0)
            sender[move] = mid
        if inter.size:
            if routing.balance is Balance.ADAPTIVE:
                load = np.zeros(t.links) if load is None else np.array(load, dtype=float)
            self._add_fixed(parts, latency, inter, self.nic_up[sender[inter]], 1.0)
            self._add_fixed(parts, latency, inter, self.nic_down[dst[inter]], 1.0)
            self._route_switches(parts, latency, inter, sender, dst, key, routing, load)
        flow = np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64)
        link = np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64)
        frac = np.concatenate([p[2] for p in parts]) if parts else np.zeros(0)
        return Routes(flow, link, frac, latency)

    def _add_fixed(self, parts, latency, flows, links, frac) -> None:
        if np.any(links < 0):
            raise ConfigError("topology", self.topology.kind, "a link for every GPU on this route")
        parts.append((flows, links, np.full(flows.size, frac)))
        latency[flows] += self.topology.link_latency[links]

    def _route_switches(self, parts, latency, flows, sender, dst, key, routing, load) -> None:
        t = self.topology
        s_sw, d_sw = self.gpu_switch[sender[flows]], self.gpu_switch[dst[flows]]
        cross = s_sw != d_sw
        flows, s_sw, d_sw = flows[cross], s_sw[cross], d_sw[cross]
        order = np.argsort(d_sw, kind="stable")  # flows grouped by destination switch
        flows, s_sw, d_sw = flows[order], s_sw[order], d_sw[order]
        targets, first = np.unique(d_sw, return_index=True)
        bounds = np.r_[first, d_sw.size]
        for target, dist, a, b in zip(targets.tolist(), self.distances(targets), bounds[:-1], bounds[1:]):
            fl, sources = flows[a:b], s_sw[a:b]
            far = dist[self._sw[sources]]
            if np.any(far < 0):
                bad = int(fl[far < 0][0])
                raise ConfigError(f"no route from GPU {int(sender[bad])} to GPU {int(dst[bad])} on this "
                                  f"{t.kind} fabric (cross-rail traffic needs rail-aware routing: --routing rail)")
            if routing.balance is Balance.SPRAY:
                self._spray_flows(parts, latency, fl, sources, target)
            elif routing.balance is Balance.ECMP:
                self._ecmp_flows(parts, latency, fl, sources, dist, sender, dst, key, routing.seed)
            else:
                self._adaptive_flows(parts, latency, fl, sources, dist, sender, dst, key, routing.seed, load)

    def _spray_flows(self, parts, latency, flows, sources, target) -> None:
        lat = self.topology.link_latency
        for s in np.unique(sources).tolist():
            fl = flows[sources == s]
            links, frac = self.spray_split(s, target)
            parts.append((np.repeat(fl, links.size), np.tile(links, fl.size), np.tile(frac, fl.size)))
            latency[fl] += float(np.dot(frac, lat[links]))

    def _ecmp_flows(self, parts, latency, flows, sources, dist, sender, dst, key, seed) -> None:
        t = self.topology
        cur = sources.copy()
        h = flow_hash(seed, sender[flows], dst[flows], key[flows])
        for _ in range(int(dist[self._sw[sources]].max())):
            live = np.flatnonzero(dist[self._sw[cur]] > 0)
            if not live.size:
                break
            u = cur[live]
            at, which = np.unique(u, return_inverse=True)
            ptr, options = self.next_hops(at, dist)
            deg = (ptr[1:] - ptr[:-1])[which]
            pick = (flow_hash(seed, h[live], u) % deg.astype(np.uint64)).astype(np.int64)
            links = options[ptr[which] + pick]
            parts.append((flows[live], links, np.ones(live.size)))
            latency[flows[live]] += t.link_latency[links]
            cur[live] = t.link_dst[links]

    def _adaptive_flows(self, parts, latency, flows, sources, dist, sender, dst, key, seed, load) -> None:
        t = self.topology
        h = flow_hash(seed, sender[flows], dst[flows], key[flows])
        cap = t.link_capacity
        hops: dict[int, np.ndarray] = {}  # next hops from a switch towards this destination
        for i in range(flows.size):  # sequential by nature: each choice sees the ones before
            u, chosen = int(sources[i]), []
            while dist[self._sw[u]] > 0:
                opts = hops.get(u)
                if opts is None:
                    opts = hops[u] = self.next_hops(np.array([u]), dist)[1]
                score = (load[opts] + 1.0) / cap[opts]
                best = opts[score <= score.min() * (1 + 1e-12)]
                link = int(best[int(h[i] % np.uint64(best.size))])
                load[link] += 1.0
                chosen.append(link)
                u = int(t.link_dst[link])
            parts.append((np.full(len(chosen), flows[i]), np.asarray(chosen, np.int64), np.ones(len(chosen))))
            latency[flows[i]] += float(t.link_latency[chosen].sum())
