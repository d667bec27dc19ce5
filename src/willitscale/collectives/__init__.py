"""Collective operations: names, nccl-tests metrics, alpha-beta cost per algorithm, the choice.

>>> from willitscale.collectives import LinkCost, fastest
>>> fastest("all_reduce", 1e9, 8, LinkCost(bandwidth=100e9, latency=0.0)).algorithm.value
'ring'

Heavy lifting is numpy; this package is not imported by ``willitscale --help``.
"""

from willitscale.collectives.algorithms import (
    NCCL_ALGORITHMS,
    PREFERENCE,
    Algorithm,
    NotApplicable,
    applicable_algorithms,
    not_applicable_reason,
    parse_algorithm,
)
from willitscale.collectives.choice import DEFAULT_TOLERANCE, Choice, fastest
from willitscale.collectives.cost import (
    CollectiveCost,
    collective_cost,
    collective_costs,
)
from willitscale.collectives.metrics import algbw, busbw, busbw_factor, nccl_tests_size
from willitscale.collectives.network import (
    DEFAULT_INTRA_LATENCY,
    DEFAULT_LINK,
    Hierarchy,
    LinkCost,
    Network,
)
from willitscale.collectives.ops import Op, parse_op

__all__ = [
    "DEFAULT_INTRA_LATENCY",
    "DEFAULT_LINK",
    "DEFAULT_TOLERANCE",
    "NCCL_ALGORITHMS",
    "PREFERENCE",
    "Algorithm",
    "Choice",
    "CollectiveCost",
    "Hierarchy",
    "LinkCost",
    "Network",
    "NotApplicable",
    "Op",
    "algbw",
    "applicable_algorithms",
    "busbw",
    "busbw_factor",
    "collective_cost",
    "collective_costs",
    "fastest",
    "nccl_tests_size",
    "not_applicable_reason",
    "parse_algorithm",
    "parse_op",
]
