"""Collective algorithms, and which of them can run which operation on which network.

Not every algorithm implements every operation: asking for one that does not raises
:class:`NotApplicable` with the reason, never a made-up number.
"""

from __future__ import annotations

from enum import StrEnum

from willitscale.collectives.network import Hierarchy, LinkCost
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError

__all__ = [
    "NCCL_ALGORITHMS",
    "PREFERENCE",
    "Algorithm",
    "NotApplicable",
    "applicable_algorithms",
    "nccl_algorithms",
    "not_applicable_reason",
    "parse_algorithm",
]


class Algorithm(StrEnum):
    """A way to implement a collective (see ``docs/collectives.md`` for each one's cost)."""

    RING = "ring"
    BINARY_TREE = "binary_tree"
    DOUBLE_BINARY_TREE = "double_binary_tree"
    HALVING_DOUBLING = "halving_doubling"
    PARAMETER_SERVER = "parameter_server"
    NAIVE = "naive"
    DIRECT = "direct"
    HIERARCHICAL = "hierarchical"


_ALIASES = {
    "tree": Algorithm.BINARY_TREE, "btree": Algorithm.BINARY_TREE,
    "dbt": Algorithm.DOUBLE_BINARY_TREE, "doubletree": Algorithm.DOUBLE_BINARY_TREE,
    "nccltree": Algorithm.DOUBLE_BINARY_TREE,
    "hd": Algorithm.HALVING_DOUBLING, "rabenseifner": Algorithm.HALVING_DOUBLING,
    "recursivehalvingdoubling": Algorithm.HALVING_DOUBLING,
    "ps": Algorithm.PARAMETER_SERVER, "naivedecentralized": Algorithm.NAIVE,
    "decentralized": Algorithm.NAIVE, "hier": Algorithm.HIERARCHICAL,
}

#: The algorithms NCCL runs: its ring, its tree (a double binary tree across nodes with a chain
#: inside each node) and direct peer-to-peer sends for all_to_all and send_recv.
NCCL_ALGORITHMS: tuple[Algorithm, ...] = (Algorithm.RING, Algorithm.DOUBLE_BINARY_TREE, Algorithm.DIRECT)

#: Tie-break order for :func:`~willitscale.collectives.choice.fastest`: when two algorithms are
#: within the model's tolerance of each other, the earlier one wins (NCCL's own first).
PREFERENCE: tuple[Algorithm, ...] = (
    Algorithm.RING, Algorithm.DOUBLE_BINARY_TREE, Algorithm.HIERARCHICAL, Algorithm.DIRECT,
    Algorithm.HALVING_DOUBLING, Algorithm.BINARY_TREE, Algorithm.NAIVE, Algorithm.PARAMETER_SERVER,
)


def parse_algorithm(name: str, *, field: str = "algorithm") -> Algorithm:
    """An :class:`Algorithm` from its name (``double-binary-tree``, ``dbt``, ``ps`` are accepted)."""
    key = str(name).strip().lower().replace("-", "_").replace(" ", "_")
    try:
        return Algorithm(key)
    except ValueError:
        pass
    if key.replace("_", "") in _ALIASES:
        return _ALIASES[key.replace("_", "")]
    raise ConfigError(field, name, "one of " + ", ".join(a.value for a in Algorithm))


class NotApplicable(ConfigError):
    """The algorithm does not implement this operation (or not on this network); says why."""

    def __init__(self, op: Op, algorithm: Algorithm, reason: str):
        self.op, self.algorithm, self.reason = op, algorithm, reason
        super().__init__(f"{algorithm.value} cannot run {op.value}: {reason}")


_A, _O = Algorithm, Op
_ALL_OPS = frozenset(Op)
#: operation -> algorithms that implement it (on a flat network)
_FLAT: dict[Algorithm, frozenset[Op]] = {
    _A.RING: frozenset({_O.ALL_REDUCE, _O.REDUCE_SCATTER, _O.ALL_GATHER, _O.BROADCAST, _O.REDUCE}),
    _A.BINARY_TREE: frozenset({_O.ALL_REDUCE, _O.BROADCAST, _O.REDUCE}),
    _A.DOUBLE_BINARY_TREE: frozenset({_O.ALL_REDUCE, _O.BROADCAST, _O.REDUCE}),
    _A.HALVING_DOUBLING: frozenset({_O.ALL_REDUCE, _O.REDUCE_SCATTER, _O.ALL_GATHER, _O.BROADCAST, _O.REDUCE}),
    _A.PARAMETER_SERVER: frozenset({_O.ALL_REDUCE, _O.REDUCE_SCATTER, _O.ALL_GATHER, _O.BROADCAST, _O.REDUCE}),
    _A.NAIVE: frozenset({_O.ALL_REDUCE}),
    _A.DIRECT: frozenset({_O.ALL_TO_ALL, _O.SEND_RECV}),
    _A.HIERARCHICAL: frozenset({_O.ALL_REDUCE, _O.REDUCE_SCATTER, _O.ALL_GATHER}),
}
#: algorithms with a two-level model (the others are modelled on one level only)
_TWO_LEVEL = frozenset({_A.RING, _A.DOUBLE_BINARY_TREE, _A.HIERARCHICAL, _A.PARAMETER_SERVER, _A.DIRECT})

_WHY_NOT = {
    _A.RING: "a ring implements the reductions, gathers and broadcast; all_to_all and send_recv use direct",
    _A.BINARY_TREE: "a tree reduces to a root and broadcasts from it; it has no reduce_scatter, "
    "all_gather or all_to_all",
    _A.DOUBLE_BINARY_TREE: "double binary trees implement all_reduce, broadcast and reduce only "
    "(NCCL runs its tree for all_reduce)",
    _A.HALVING_DOUBLING: "recursive halving/doubling is modelled for the reductions, gathers and "
    "broadcast; all_to_all and send_recv use direct",
    _A.PARAMETER_SERVER: "a parameter server relays reductions, gathers and broadcasts through one "
    "server; all_to_all and send_recv are point-to-point (use direct)",
    _A.NAIVE: "the naive decentralized scheme (the distributed-training lecture) is an all_reduce",
    _A.DIRECT: "direct is every rank sending to its peers at once: all_to_all and send_recv "
    "(for the others use ring, trees or halving_doubling)",
    _A.HIERARCHICAL: "hierarchical is reduce-scatter inside, all-reduce across, all-gather inside: "
    "all_reduce, reduce_scatter and all_gather",
}


def not_applicable_reason(op: Op, algorithm: Algorithm, network: LinkCost | Hierarchy) -> str | None:
    """Why ``algorithm`` cannot run ``op`` on ``network``, or ``None`` if it can."""
    op, algorithm = Op(op), Algorithm(algorithm)
    if op not in _FLAT[algorithm]:
        return _WHY_NOT[algorithm]
    if algorithm is Algorithm.HIERARCHICAL and not isinstance(network, Hierarchy):
        return "it needs two levels (ranks per node, an intra-node and an inter-node link)"
    if isinstance(network, Hierarchy) and algorithm not in _TWO_LEVEL:
        return (
            f"{algorithm.value} is modelled on one level only; on two levels use hierarchical, "
            "ring or double_binary_tree (or give one flat link)"
        )
    return None


def applicable_algorithms(op: Op, network: LinkCost | Hierarchy) -> tuple[Algorithm, ...]:
    """Every algorithm that can run ``op`` on ``network``, in :data:`PREFERENCE` order."""
    return tuple(a for a in PREFERENCE if not_applicable_reason(op, a, network) is None)


def nccl_algorithms(op: Op | str) -> tuple[Algorithm, ...]:
    """The algorithms NCCL runs for ``op``, in :data:`PREFERENCE` order: its ring, its tree for
    all_reduce only, and direct peer-to-peer sends for all_to_all and send_recv."""
    op = Op(op)
    return tuple(a for a in PREFERENCE if a in NCCL_ALGORITHMS and op in _FLAT[a]
                 and (a is not Algorithm.DOUBLE_BINARY_TREE or op is Op.ALL_REDUCE))
