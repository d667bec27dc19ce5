"""Alpha-beta cost on two levels: ``g`` ranks per node on ``intra`` links, ``m`` nodes on ``inter``.

Ranks are placed node by node. Notation: ``alpha1, B1`` each rank's intra-node latency and
one-direction bandwidth; ``alpha2, B2`` the inter-node latency and the **node's** one-direction
bandwidth (all its NICs), shared by its ``g`` ranks; ``m = n / g`` nodes. When ``n <= g`` the
ranks share one node (``g = n, m = 1``). "Node" in the results means a server here: the node
figures count the bytes through its NICs, and fan-in counts remote senders into it.

* ``ring``: NCCL's ring over all ranks, node by node, on as many channels as it takes to use
  every NIC. Each step moves ``S/n`` per rank over NVLink and ``S/n`` across each node boundary,
  so the slower of ``B1`` and ``B2`` sets the pace (with ``rails``, a NIC per GPU, the rings
  leave through every GPU in turn and each GPU's NVLink carries ``(g-1)/g`` of the bytes); latency follows NCCL's tuning model
  (src/graph/tuning.cc): ``2(m-1)`` inter-node steps at ``alpha2`` and the rest at ``alpha1``.
* ``double_binary_tree``: NCCL's tree: a chain through the ``g`` ranks of each node and a double
  binary tree over the ``m`` nodes, all pipelined.
* ``hierarchical``: ring reduce-scatter inside each node, then each rank all-reduces its ``S/g``
  shard across nodes with its peers (the ``g`` rings share the node's NICs), then ring all-gather
  inside: ``2(g-1)·alpha1 + 2(m-1)·alpha2 + 2(g-1)/g·S/B1 + 2(m-1)/m·S/B2``.
* ``parameter_server``: a separate server node on the inter-node network.
* ``direct``: all_to_all and send_recv, all transfers at once.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.algorithms import Algorithm
from willitscale.collectives.flat import Terms, _dbt_factor, log2_ceil, star_traffic
from willitscale.collectives.network import Hierarchy
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError

__all__ = ["split_ranks", "two_level_terms"]


def split_ranks(n, ranks_per_node: int):
    """``(g, m)``: ranks per node actually used and nodes, for ``n`` ranks placed node by node."""
    g = np.minimum(float(ranks_per_node), n)
    m = n / g
    if not np.all(m == np.floor(m)):
        bad = np.asarray(n)[m != np.floor(m)].flat[0] if np.ndim(n) else n
        raise ConfigError(
            "ranks", int(bad), f"a multiple of ranks_per_node = {ranks_per_node} (or at most {ranks_per_node})"
        )
    return g, m


def _slowest(u1, x1, u2, x2):
    """The larger of two per-level costs, counting a level only where it is used."""
    return np.maximum(np.where(u1, x1, 0.0), np.where(u2, x2, 0.0))


def _ring(op, S, n, g, m, a1, b1, a2, b2, u1, u2):
    if op in (Op.ALL_REDUCE, Op.REDUCE_SCATTER, Op.ALL_GATHER):
        k = 2.0 if op is Op.ALL_REDUCE else 1.0
        steps, inter_steps = k * (n - 1), k * (m - 1)
        chunk = S / n
        bw = steps * _slowest(u1, chunk / b1, u2, chunk / b2)
        lat = (steps - inter_steps) * a1 + inter_steps * a2
        node = np.where(u2, steps * chunk, 0.0)  # one boundary crossing per node per step
        f = "2(n-m)·α1 + 2(m-1)·α2 + 2(n-1)/n·S/min(B1,B2)" if k == 2 else "(n-m)·α1 + (m-1)·α2 + (n-1)/n·S/min(B1,B2)"
        return steps, lat, bw, steps * chunk, node, node, np.where(u2, chunk, 0.0), u2 * 1.0, f
    # broadcast / reduce: a pipelined chain through every rank
    lat = (n - m) * a1 + (m - 1) * a2
    bw = S * _slowest(u1, 1 / b1, u2, 1 / b2)
    node = np.where(u2, S, 0.0)
    return n - 1, lat, bw, S + 0 * n, node, node, node, u2 * 1.0, "(n-m)·α1 + (m-1)·α2 + S/min(B1,B2)  (pipelined)"


def _double_binary_tree(op, S, n, g, m, a1, b1, a2, b2, u1, u2):
    h = log2_ceil(m)
    if op is Op.ALL_REDUCE:
        chain = np.select([g >= 3, g == 2], [2.0, 1.0], 0.0)  # S each way per neighbour on the chain
        f = _dbt_factor(m)
        bw = S * np.maximum(chain / b1, f / b2)
        lat = 2 * (g - 1) * a1 + 2 * h * a2
        sent = np.maximum(chain, u1 + f) * S  # the chain rank that also carries the node's tree traffic
        node = f * S
        return (2 * (g - 1) + 2 * h, lat, bw, sent, node, node, node, np.minimum(m - 1, 4.0),
                "2(g-1)·α1 + 2⌈log2 m⌉·α2 + max(2·S/B1, 2·S/B2)  (chain inside, double binary tree across)")
    bw = S * _slowest(u1, 1 / b1, u2, 1 / b2)
    lat = (g - 1) * a1 + h * a2
    sent = (u1 + u2) * S if op is Op.BROADCAST else np.maximum(u1, u2) * S
    node = np.where(u2, S, 0.0)
    return ((g - 1) + h, lat, bw, sent, node, node, node, np.minimum(m - 1, 2.0),
            "(g-1)·α1 + ⌈log2 m⌉·α2 + S/min(B1,B2)  (chain inside, double binary tree across)")


def _hierarchical(op, S, n, g, m, a1, b1, a2, b2, u1, u2):
    k = 2.0 if op is Op.ALL_REDUCE else 1.0  # all_reduce = both halves; RS or AG = one
    lat = k * (g - 1) * a1 + k * (m - 1) * a2
    bw = k * (g - 1) / g * S / b1 + k * (m - 1) / m * S / b2
    sent = k * (g - 1) / g * S + k * (m - 1) / m * S / g
    node = k * (m - 1) / m * S  # g ranks each send k(m-1)/m · S/g through the node's NICs
    if op is Op.ALL_REDUCE:
        f = "2(g-1)·α1 + 2(m-1)·α2 + 2(g-1)/g·S/B1 + 2(m-1)/m·S/B2"
    else:
        f = "(g-1)·α1 + (m-1)·α2 + (g-1)/g·S/B1 + (m-1)/m·S/B2"
    return k * (g - 1) + k * (m - 1), lat, bw, sent, node, node, np.where(u2, S / m, 0.0), u2 * g, f


def _parameter_server(op, S, n, g, m, a1, b1, a2, b2, u1, u2):
    p, k, q, pullers = star_traffic(op, S, n)
    # the server's NICs carry k·p in, then pullers·q out; a worker node carries at most g ranks' share
    node_in = np.maximum(k * p, np.minimum(pullers, g) * q)
    node_out = np.maximum(pullers * q, np.minimum(k, g) * p)
    bw = (k * p + pullers * q) / b2
    lat = (k + pullers) * a2  # the server's port takes/sends one message at a time
    return (2.0 + 0 * n, lat, bw, p + 0 * n, node_in, node_out, node_in, k + 0 * n,
            "(server messages)·α2 + (server in + server out)/B2  (a server node on the inter-node network)")


def _direct(op, S, n, g, m, a1, b1, a2, b2, u1, u2):
    if op is Op.ALL_TO_ALL:
        intra = (g - 1) / n * S  # each rank to its g-1 node mates
        node = g * (n - g) / n * S  # the node's g ranks to the n-g remote ranks
        bw = _slowest(u1, intra / b1, u2, node / b2)
        lat = (g - 1) * a1 + (n - g) * a2  # one alpha per message a rank's port starts
        return (1.0 + 0 * n, lat, bw, (n - 1) / n * S, node, node, node, n - g,
                "(g-1)·α1 + (n-g)·α2 + max((g-1)/n·S/B1, g(n-g)/n·S/B2)  (one round, all sends at once)")
    lat = _slowest(u1, a1, u2, a2)
    bw = S * _slowest(u1, 1 / b1, u2, 1 / b2)  # send_recv: rank i to i+1, one crossing per node
    node = np.where(u2, S, 0.0)
    return 1.0 + 0 * n, lat, bw, S + 0 * n, node, node, node, u2 * 1.0, "max(α1, α2) + S/min(B1,B2)"


_FORMULAS = {
    Algorithm.RING: _ring,
    Algorithm.DOUBLE_BINARY_TREE: _double_binary_tree,
    Algorithm.HIERARCHICAL: _hierarchical,
    Algorithm.PARAMETER_SERVER: _parameter_server,
    Algorithm.DIRECT: _direct,
}


def two_level_terms(op: Op, algorithm: Algorithm, S, n, network: Hierarchy) -> Terms:
    """The cost of ``algorithm`` running ``op`` on ``network``; applicability is checked by the caller."""
    g, m = split_ranks(n, network.ranks_per_node)
    a1, b1 = network.intra.latency, network.intra.bandwidth
    a2, b2 = network.inter.latency, network.inter.bandwidth
    u1, u2 = g > 1, m > 1
    if algorithm is Algorithm.RING and network.rails:
        # With a NIC per GPU, NCCL runs one ring per NIC and each ring leaves the node through a
        # different GPU: of a step's g sends per node, g-1 cross NVLink and one its NIC, so each
        # GPU's intra-node link carries (g-1)/g of the bytes -- as fast as B1 * g/(g-1).
        b1 = np.where(u1 & u2, b1 * g / np.maximum(g - 1, 1), b1)
    parts = _FORMULAS[algorithm](op, S, n, g, m, a1, b1, a2, b2, u1, u2)
    rounds, lat, bw, sent, node_in, node_out, node_round, fan_in, formula = parts
    active = n > 1
    z = [np.where(active, np.asarray(x, dtype=float), 0.0) for x in parts[:-1]]
    rounds, lat, bw, sent, node_in, node_out, node_round, fan_in = z
    return Terms(
        rounds=rounds, latency_time=lat, bandwidth_time=bw, sent=sent, node_in=node_in,
        node_out=node_out, node_round=node_round, fan_in=fan_in, formula=formula,
    )
