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
from scipy.sparse import csr_matrix
from scipy.sparse.csgraph import shortest_path

from willitscale.errors import ConfigError
from willitscale.topology.graph import Topology, VertexKind

__all__ = ["Balance", "Routing", "ROUTINGS", "parse_routing", "Routes", "Router", "flow_hash"]


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

    def matrix(self, n_links: int) -> csr_matrix:
        """The (flows x links) incidence as CSR; duplicate entries are summed."""
        return csr_matrix((self.frac, (self.flow, self.link)), shape=(self.latency.size, n_links))


@dataclass(frozen=True, slots=True)
class _Dag:
    dist: np.ndarray  # hops from each vertex to the destination switch (-1: unreachable)
    indptr: np.ndarray  # CSR over vertices of the next-hop links
    links: np.ndarray


class Router:
    """Routes flows on one topology; caches per-destination next-hop tables (per instance)."""

    def __init__(self, topology: Topology):
        t = self.topology = topology
        self.nic_up, self.nic_down = t.nic_links()
        self.nvl_up, self.nvl_down = t.nvlink_links()
        self.gpu_switch = np.where(self.nic_up >= 0, t.link_dst[np.maximum(self.nic_up, 0)], -1)
        is_sw = t.vertex_kind == VertexKind.SWITCH
        self._sw_links = np.flatnonzero(is_sw[t.link_src] & is_sw[t.link_dst])
        n = t.vertices
        adj = csr_matrix((np.ones(self._sw_links.size), (t.link_dst[self._sw_links], t.link_src[self._sw_links])),
                         shape=(n, n))
        self._reverse_adj = adj
        self._dags: dict[int, _Dag] = {}
        self._spray: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}

    # -- next-hop tables -------------------------------------------------------------
    def dag(self, target: int) -> _Dag:
        """Minimal next hops towards switch ``target`` from every switch."""
        cached = self._dags.get(target)
        if cached is not None:
            return cached
        t = self.topology
        d = shortest_path(self._reverse_adj, unweighted=True, indices=target, directed=True)
        dist = np.where(np.isfinite(d), d, -1).astype(np.int64)
        s, e = t.link_src[self._sw_links], t.link_dst[self._sw_links]
        ok = (dist[s] >= 0) & (dist[e] >= 0) & (dist[s] == dist[e] + 1)
        links = self._sw_links[ok]
        links = links[np.argsort(t.link_src[links], kind="stable")]
        indptr = np.searchsorted(t.link_src[links], np.arange(t.vertices + 1))
        dag = self._dags[target] = _Dag(dist, indptr, links)
        return dag

    def spray_split(self, source: int, target: int) -> tuple[np.ndarray, np.ndarray]:
        """Links and byte fractions of a flow sprayed evenly at every hop from ``source``."""
        key = (source, target)
        if key in self._spray:
            return self._spray[key]
        dag, t = self.dag(target), self.topology
        mass = {source: 1.0}
        out_links, out_frac = [], []
        for _ in range(int(dag.dist[source])):
            nxt: dict[int, float] = {}
            for u, m in mass.items():
                opts = dag.links[dag.indptr[u]:dag.indptr[u + 1]]
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
        for target in np.unique(d_sw).tolist():
            sel = d_sw == target
            fl, sources = flows[sel], s_sw[sel]
            dag = self.dag(target)
            if np.any(dag.dist[sources] < 0):
                bad = int(fl[dag.dist[sources] < 0][0])
                raise ConfigError(f"no route from GPU {int(sender[bad])} to GPU {int(dst[bad])} on this "
                                  f"{t.kind} fabric (cross-rail traffic needs rail-aware routing: --routing rail)")
            if routing.balance is Balance.SPRAY:
                self._spray_flows(parts, latency, fl, sources, target)
            elif routing.balance is Balance.ECMP:
                self._ecmp_flows(parts, latency, fl, sources, dag, sender, dst, key, routing.seed)
            else:
                self._adaptive_flows(parts, latency, fl, sources, dag, sender, dst, key, routing.seed, load)

    def _spray_flows(self, parts, latency, flows, sources, target) -> None:
        lat = self.topology.link_latency
        for s in np.unique(sources).tolist():
            fl = flows[sources == s]
            links, frac = self.spray_split(s, target)
            parts.append((np.repeat(fl, links.size), np.tile(links, fl.size), np.tile(frac, fl.size)))
            latency[fl] += float(np.dot(frac, lat[links]))

    def _ecmp_flows(self, parts, latency, flows, sources, dag, sender, dst, key, seed) -> None:
        t = self.topology
        cur = sources.copy()
        h = flow_hash(seed, sender[flows], dst[flows], key[flows])
        for _ in range(int(dag.dist[sources].max())):
            live = np.flatnonzero(dag.dist[cur] > 0)
            if not live.size:
                break
            u = cur[live]
            deg = dag.indptr[u + 1] - dag.indptr[u]
            pick = (flow_hash(seed, h[live], u) % deg.astype(np.uint64)).astype(np.int64)
            links = dag.links[dag.indptr[u] + pick]
            parts.append((flows[live], links, np.ones(live.size)))
            latency[flows[live]] += t.link_latency[links]
            cur[live] = t.link_dst[links]

    def _adaptive_flows(self, parts, latency, flows, sources, dag, sender, dst, key, seed, load) -> None:
        t = self.topology
        h = flow_hash(seed, sender[flows], dst[flows], key[flows])
        cap = t.link_capacity
        for i in range(flows.size):  # sequential by nature: each choice sees the ones before
            u, chosen = int(sources[i]), []
            while dag.dist[u] > 0:
                opts = dag.links[dag.indptr[u]:dag.indptr[u + 1]]
                score = (load[opts] + 1.0) / cap[opts]
                best = opts[score <= score.min() * (1 + 1e-12)]
                link = int(best[int(h[i] % np.uint64(best.size))])
                load[link] += 1.0
                chosen.append(link)
                u = int(t.link_dst[link])
            parts.append((np.full(len(chosen), flows[i]), np.asarray(chosen, np.int64), np.ones(len(chosen))))
            latency[flows[i]] += float(t.link_latency[chosen].sum())
