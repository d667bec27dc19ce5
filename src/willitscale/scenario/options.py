"""Options of model-parallel execution that are not degrees of the plan.

:class:`ParallelOptions` says how ranks are placed on the cluster (:mod:`willitscale.topology.placement`), whether
tensor-parallel communication overlaps the GEMMs (Megatron-Core's ``--tp-comm-overlap``,
userbuffers), whether attention runs as FlashAttention (it changes activation memory and the
FLOPs the backward reruns), and whether a tensor-parallel group may leave its node.
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.errors import ConfigError
from willitscale.topology.placement import DEFAULT_ORDER, parse_order

__all__ = ["COLLECTIVE_BACKENDS", "ParallelOptions"]

#: the collective libraries the estimate models
COLLECTIVE_BACKENDS = ("nccl", "gloo", "alpha-beta")


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelOptions:
    """Placement and execution choices shared by every plan of a scenario."""

    rank_order: tuple[str, ...] = DEFAULT_ORDER  #: axes innermost first (tp-cp-ep-dp-pp)
    tp_comm_overlap: bool = False  #: TP collectives hidden under the GEMMs they feed, where possible
    flash_attention: bool = True  #: FlashAttention (no s x s scores kept; Q K^T rerun in backward)
    allow_tp_across_nodes: bool = True  #: the planner rejects tp > GPUs per node when False
    #: how collectives are costed: "nccl" (NCCL's algorithm x protocol choice and its achieved
    #: time), "gloo" (PyTorch's Gloo: rings over TCP) or "alpha-beta" (the textbook ring and
    #: double binary tree on the links, as before NCCL's model); docs/collectives.md
    collectives: str = "nccl"

    def __post_init__(self) -> None:
        object.__setattr__(self, "rank_order", parse_order(self.rank_order))
        if self.collectives not in COLLECTIVE_BACKENDS:
            raise ConfigError("collectives", self.collectives, "one of " + ", ".join(COLLECTIVE_BACKENDS))

    @property
    def order_text(self) -> str:
        return "-".join(self.rank_order)
