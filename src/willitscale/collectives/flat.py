"""Alpha-beta cost of each algorithm on one flat level (every rank has the same link).

Notation (as in ``docs/collectives.md``): ``S`` the operation's size in bytes, in nccl-tests'
convention (all_gather: the gathered output; reduce_scatter: the input; all_to_all: one rank's
send buffer), ``n`` ranks, ``alpha`` seconds per hop, ``B`` bytes/s one rank sends in one
direction while it receives as much (full duplex). ``p = 2^floor(log2 n)``.

Each function returns :class:`Terms` with the time split into ``alphas x alpha`` and
``W / B`` where ``W`` is the bytes through the busiest rank's link on the critical path.
``alphas`` is the number of rounds, except where one port must start many messages in a round
(the parameter server's, and every rank's in direct all_to_all): the single-port model of
Thakur et al. (2005) charges one alpha per message there.
Step-by-step algorithms (ring, halving-doubling, naive, parameter server) pay one alpha per step;
the trees and the ring broadcast are pipelined, and we take the *pipelined limit* (the form
NCCL's own tuning model uses, ``time = latency + size / bandwidth``): one alpha per hop of the
deepest path, and every transfer running at once so the busiest rank's bytes set ``W``.

Everything is numpy: ``S`` and ``n`` broadcast, and ``n = 1`` costs exactly 0.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from willitscale.collectives.algorithms import Algorithm
from willitscale.collectives.ops import Op

__all__ = ["Terms", "flat_terms", "log2_ceil", "log2_floor"]


@dataclass(frozen=True, slots=True)
class Terms:
    """One algorithm's cost before it becomes a result (all bytes, seconds, counts; arrays ok)."""

    rounds: object  #: latency terms on the critical path
    latency_time: object  #: seconds spent on latency
    bandwidth_time: object  #: seconds spent moving bytes
    sent: object  #: bytes sent by the busiest rank
    node_in: object  #: bytes into the busiest node
    node_out: object  #: bytes out of the busiest node
    node_round: object  #: the most bytes into one node in one round (pipelined: the whole op)
    fan_in: object  #: most senders into one node at once
    formula: str


def log2_floor(n):
    """``floor(log2 n)`` for integers ``n >= 1``, exact (no float log rounding)."""
    _, e = np.frexp(np.asarray(n, dtype=float))
    return (e - 1).astype(float)


def log2_ceil(n):
    """``ceil(log2 n)`` for integers ``n >= 1``, exact."""
    m, e = np.frexp(np.asarray(n, dtype=float))
    return np.where(m == 0.5, e - 1, e).astype(float)


def _one(n):
    return np.ones_like(n)


class _F(NamedTuple):
    """What a formula returns; ``alphas`` (latency terms) defaults to ``rounds``."""

    rounds: object
    w: object  # bytes through the busiest rank's link, on the critical path
    sent: object
    node_in: object
    node_out: object
    node_round: object
    fan_in: object
    formula: str
    alphas: object = None


# Each formula: (op, S, n) -> _F. Derivations are in docs/collectives.md, section by section.


def _ring(op: Op, S, n):
    if op is Op.ALL_REDUCE:  # reduce-scatter then all-gather, n-1 steps each of S/n
        w = 2 * (n - 1) / n * S
        return 2 * (n - 1), w, w, w, w, S / n, _one(n), "2(n-1)·α + 2(n-1)/n·S/B"
    if op in (Op.REDUCE_SCATTER, Op.ALL_GATHER):
        w = (n - 1) / n * S
        return n - 1, w, w, w, w, S / n, _one(n), "(n-1)·α + (n-1)/n·S/B"
    # broadcast / reduce: a pipelined chain through the n ranks
    return n - 1, S, S, S, S, S, _one(n), "(n-1)·α + S/B  (pipelined chain)"


def _binary_tree(op: Op, S, n):
    h = log2_floor(n)  # depth of a complete binary tree of n ranks
    if op is Op.ALL_REDUCE:
        # pipelined reduce up + broadcast down at once: an inner rank with a parent and two
        # children exchanges S with each of its 3 neighbours each way (n >= 5); n = 2, 3, 4 -> 1, 2, 2
        t = np.select([n >= 5, n >= 3, n == 2], [3.0, 2.0, 1.0], 0.0)
        return 2 * h, t * S, t * S, t * S, t * S, t * S, t, "2⌊log2 n⌋·α + 3·S/B  (pipelined; 1, 2, 2 ·S/B at n = 2, 3, 4)"
    c = np.minimum(2.0, n - 1)  # children of an inner rank
    if op is Op.BROADCAST:
        return h, c * S, c * S, S, c * S, S, _one(n), "⌊log2 n⌋·α + 2·S/B  (pipelined; S/B at n = 2)"
    return h, c * S, S, c * S, S, c * S, c, "⌊log2 n⌋·α + 2·S/B  (pipelined; S/B at n = 2)"  # reduce


def _dbt_factor(n):
    """Bytes (in units of S) through the busiest rank of a pipelined double-binary-tree all-reduce.

    Each tree carries S/2. A rank inner in one tree (a parent and two children: 3 x S/2 each way)
    and a leaf in the other (S/2 each way) moves 2S each way; that happens from n = 4 on. With NCCL's
    trees (rooted at 0 with one child, the second tree mirrored or shifted) n = 3 gives 1.5 and
    n = 2 gives 1 (the two ranks swap halves).
    """
    return np.select([n >= 4, n == 3, n == 2], [2.0, 1.5, 1.0], 0.0)


def _double_binary_tree(op: Op, S, n):
    h = log2_ceil(n)  # depth of NCCL's tree: root 0 with one child, then a balanced in-order tree
    if op is Op.ALL_REDUCE:
        f = _dbt_factor(n)
        fan = np.minimum(n - 1, 4.0)  # at most two parents and two children
        return 2 * h, f * S, f * S, f * S, f * S, f * S, fan, "2⌈log2 n⌉·α + 2·S/B  (pipelined; 1, 1.5 ·S/B at n = 2, 3)"
    fan = np.minimum(n - 1, 2.0)  # broadcast: one parent per tree; reduce: two children in one tree
    return h, S, S, S, S, S, fan, "⌈log2 n⌉·α + S/B  (pipelined, half the data down each tree)"


def _largest_step_blocks(n):
    """Blocks (of S/n) in the largest step of Bruck's all-gather / a binomial scatter."""
    lc = log2_ceil(n)
    return np.maximum(n - 2.0 ** (lc - 1), 2.0 ** (lc - 2))


def _halving_doubling(op: Op, S, n):
    lp = log2_floor(n)
    p = 2.0**lp  # the power of two the exchange runs on
    e = (n > p).astype(float)  # 1 when n is not a power of two: the extra steps of Thakur et al.
    if op is Op.ALL_REDUCE:  # Rabenseifner: recursive halving reduce-scatter + doubling all-gather
        core = 2 * (p - 1) / p * S
        big = np.where(e > 0, S, S / 2)
        return (2 * lp + 2 * e, core + 2 * e * S, core + e * S, core + e * S, core + e * S, big, _one(n),
                "2log2(p)·α + 2(p-1)/p·S/B  [+ 2α + 2S/B if n ≠ p = 2^⌊log2 n⌋]")
    if op is Op.REDUCE_SCATTER:  # recursive halving; excluded ranks hand their data in, get S/n back
        core = (p - 1) / p * S
        out = np.where(e > 0, S, core)
        return (lp + 2 * e, core + e * (S + S / n), out, core + e * S, out, np.where(e > 0, S, S / 2), _one(n),
                "log2(p)·α + (p-1)/p·S/B  [+ 2α + S/B + S/(nB) if n ≠ p = 2^⌊log2 n⌋]")
    if op is Op.ALL_GATHER:  # recursive doubling, or Bruck et al. when n is not a power of two
        w = (n - 1) / n * S
        return (log2_ceil(n), w, w, w, w, _largest_step_blocks(n) * S / n, _one(n),
                "⌈log2 n⌉·α + (n-1)/n·S/B  (recursive doubling; Bruck if n ≠ 2^k)")
    if op is Op.BROADCAST:  # binomial scatter + all-gather (van de Geijn)
        w = 2 * (n - 1) / n * S
        step = _largest_step_blocks(n) * S / n
        return (2 * log2_ceil(n), w, w, (n - 1) / n * S + step, w, step, _one(n),
                "2⌈log2 n⌉·α + 2(n-1)/n·S/B  (scatter + all-gather)")
    # reduce: Rabenseifner = recursive-halving reduce-scatter + binomial gather to the root
    core = 2 * (p - 1) / p * S
    out = (p - 1) / p * S + S / 2
    return (2 * lp + e, core + e * S, out, core + e * S, out, np.where(e > 0, S, S / 2), _one(n),
            "2log2(p)·α + 2(p-1)/p·S/B  [+ α + S/B if n ≠ p = 2^⌊log2 n⌋]")


def star_traffic(op: Op, S, n):
    """A parameter server's traffic: (bytes each pusher sends, pushers, bytes each puller gets, pullers)."""
    if op is Op.ALL_REDUCE:
        return S, n, S, n
    if op is Op.REDUCE_SCATTER:
        return S, n, S / n, n
    if op is Op.ALL_GATHER:
        return S / n, n, (n - 1) / n * S, n
    if op is Op.BROADCAST:
        return S, _one(n), S, n - 1
    return S, n, S, _one(n)  # reduce


_PS_FORMULA = {
    Op.ALL_REDUCE: "2n·α + 2n·S/B  (2 rounds: the server takes in n·S, then sends n·S)",
    Op.REDUCE_SCATTER: "2n·α + (n+1)·S/B  (2 rounds: the server takes in n·S, sends S/n to each)",
    Op.ALL_GATHER: "2n·α + n·S/B  (2 rounds: the server takes in S, sends (n-1)/n·S to each)",
    Op.BROADCAST: "n·α + n·S/B  (2 rounds: root sends S to the server, which sends S to n-1 ranks)",
    Op.REDUCE: "(n+1)·α + (n+1)·S/B  (2 rounds: the server takes in n·S, sends S to the root)",
}


def _parameter_server(op: Op, S, n):
    # Two rounds (push, pull), but the server's port handles its k + m messages one at a time
    # (the single-port alpha-beta model of Thakur et al. 2005): one alpha per message.
    p, k, q, m = star_traffic(op, S, n)
    node_in = np.maximum(k * p, q)  # the server's intake, or a worker's pull
    node_out = np.maximum(m * q, p)
    return _F(2 * _one(n), k * p + m * q, p, node_in, node_out, node_in, k, _PS_FORMULA[op], alphas=k + m)


def _naive(op: Op, S, n):
    # Wei and Xia's lecture "Try #2", with later rounds moved earlier: in round k rank i sends its whole
    # vector to rank i+k, for k = 1..n-1.
    w = (n - 1) * S
    return n - 1, w, w, w, w, S, _one(n), "(n-1)·α + (n-1)·S/B"


def _direct(op: Op, S, n):
    if op is Op.ALL_TO_ALL:  # S/n to each of the n-1 others, all at once
        w = (n - 1) / n * S
        # one round, all sends posted at once; each rank's port still starts n-1 messages: (n-1)·alpha
        return _F(_one(n), w, w, w, w, w, n - 1, "(n-1)·α + (n-1)/n·S/B  (one round, all sends at once)", alphas=n - 1)
    return _one(n), S, S, S, S, S, _one(n), "α + S/B"  # send_recv: each rank sends S to the next


_FORMULAS = {
    Algorithm.RING: _ring,
    Algorithm.BINARY_TREE: _binary_tree,
    Algorithm.DOUBLE_BINARY_TREE: _double_binary_tree,
    Algorithm.HALVING_DOUBLING: _halving_doubling,
    Algorithm.PARAMETER_SERVER: _parameter_server,
    Algorithm.NAIVE: _naive,
    Algorithm.DIRECT: _direct,
}


def flat_terms(op: Op, algorithm: Algorithm, S, n, bandwidth, latency) -> Terms:
    """The cost of ``algorithm`` running ``op`` on one level; applicability is checked by the caller."""
    f = _F(*_FORMULAS[algorithm](op, S, n))
    alphas = f.rounds if f.alphas is None else f.alphas
    active = n > 1  # one rank: nothing to send
    z = [np.where(active, x, 0.0) for x in (f.rounds, alphas, f.w, f.sent, f.node_in, f.node_out, f.node_round, f.fan_in)]
    rounds, alphas, w, sent, node_in, node_out, node_round, fan_in = z
    formula = f.formula
    return Terms(
        rounds=rounds,
        latency_time=alphas * latency,
        bandwidth_time=w / bandwidth,
        sent=sent,
        node_in=node_in,
        node_out=node_out,
        node_round=node_round,
        fan_in=fan_in,
        formula=formula,
    )
