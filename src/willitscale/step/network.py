"""The network a step's communication groups run on: the :class:`Network` protocol.

Like astra-sim's pluggable network backends, the engine does not cost collectives itself: it
asks its context's network for the time lines
(:class:`~willitscale.collectives.line_time.CollectiveLines`) of every communication group of a
batch of plans, the groups placed by the one rank layout
(:func:`~willitscale.topology.placement.group_placement`). Two backends answer:

* :class:`AnalyticNetwork` (the default): :func:`~willitscale.collectives.lines.collective_lines`
  for each group, NCCL's (or Gloo's, or a calibration's alpha-beta) model of the group alone,
  the groups of one kind sharing each node's NICs evenly;
* :class:`~willitscale.step.flow_network.SimulatedNetwork` (``--network flow``): the same lines,
  each group's bytes term slowed by what the flow simulator measures when the groups of a step
  run together on the fabric (:mod:`willitscale.step.flow_network`).

The groups (keys of the dict the backends return, as the engine reads them):

================== ================= =============== ==========================================
key                placement kind    op              what
================== ================= =============== ==========================================
tp_all_reduce      tp                all_reduce      Megatron's activation all-reduces
tp_reduce_scatter  tp                reduce_scatter  ... with sequence parallelism
tp_all_gather      tp                all_gather      ... and the pipeline's scatter/gather
cp                 cp                send_recv       ring attention's K/V blocks
ep                 ep                all_to_all      MoE token dispatch and combine
pp                 pp                send_recv       activations/gradients between stages
emb                pp (2 ranks)      all_reduce      the tied embedding, first <-> last stage
dp_ar              dp                all_reduce      DDP's gradient buckets (cp x dp ranks)
edp_ar             edp               all_reduce      the experts' gradient buckets
shard_rs/_ag       shard             reduce_scatter, ZeRO's gradients and weights
                                     all_gather
eshard_rs/_ag      eshard            (same)          ... of the experts
replica            replica           all_reduce      hybrid sharding's shards across nodes
ereplica           ereplica          all_reduce      ... of the experts
================== ================= =============== ==========================================
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable


from willitscale.collectives.line_time import CollectiveLines
from willitscale.collectives.lines import collective_lines
from willitscale.topology.placement import end_pair_placement

__all__ = ["GROUPS", "Network", "AnalyticNetwork", "analytic_lines"]

#: line key -> (placement kind, op), in the order the engine builds them
GROUPS: dict[str, tuple[str, str]] = {
    "tp_all_reduce": ("tp", "all_reduce"), "tp_reduce_scatter": ("tp", "reduce_scatter"),
    "tp_all_gather": ("tp", "all_gather"), "cp": ("cp", "send_recv"), "ep": ("ep", "all_to_all"),
    "pp": ("pp", "send_recv"), "emb": ("pp", "all_reduce"), "dp_ar": ("dp", "all_reduce"),
    "shard_rs": ("shard", "reduce_scatter"), "shard_ag": ("shard", "all_gather"),
    "eshard_rs": ("eshard", "reduce_scatter"), "eshard_ag": ("eshard", "all_gather"),
    "edp_ar": ("edp", "all_reduce"), "replica": ("replica", "all_reduce"),
    "ereplica": ("ereplica", "all_reduce"),
}


@runtime_checkable
class Network(Protocol):
    """What the engine asks about communication: the lines of every group of a batch."""

    def lines(self, ctx, batch, places: dict) -> dict[str, CollectiveLines]:
        """Time lines per group key of :data:`GROUPS` (one row per plan of ``batch``)."""
        ...

    def report(self, ctx, batch, places: dict) -> dict | None:
        """What the backend adds to a one-plan estimate's report (None: nothing)."""
        ...

    def describe(self) -> str:
        """One line: which backend, on which fabric."""
        ...


def analytic_lines(ctx, batch, places: dict) -> dict[str, CollectiveLines]:
    """:func:`~willitscale.collectives.lines.collective_lines` for every group of :data:`GROUPS`."""
    links = ctx.links
    out = {}
    for key, (kind, op) in GROUPS.items():
        # the tied embedding: the first and last stage of each pipeline, on two nodes when the
        # pipeline spans nodes
        place = end_pair_placement(places[kind]) if key == "emb" else places[kind]
        out[key] = collective_lines(op, place, links)
    return out


class AnalyticNetwork:
    """The analytic backend: each group costed alone by the collective model."""

    __slots__ = ()

    def lines(self, ctx, batch, places: dict) -> dict[str, CollectiveLines]:
        return analytic_lines(ctx, batch, places)

    def report(self, ctx, batch, places: dict) -> dict | None:
        return None

    def describe(self) -> str:
        return "analytic: each group costed alone by the collective model"

    def __repr__(self) -> str:
        return "AnalyticNetwork()"
