"""Where each kind of parallel group sits on the cluster, for a report: its size, the nodes it
spans, its share of each node's NICs and whether it stays on its rail ("which groups leave the
node"). The placement itself is :mod:`willitscale.topology.placement`.
"""

from __future__ import annotations

import numpy as np

from willitscale.topology.placement import group_placement

__all__ = ["GROUP_NAME", "placement_rows", "unknowns_of", "where"]

GROUP_NAME = {"tp": "tensor parallel", "cp": "context parallel", "ep": "expert parallel",
               "pp": "pipeline", "dp": "data parallel (gradients: cp x dp)",
               "edp": "expert data parallel", "shard": "ZeRO shard group"}


def unknowns_of(scenario) -> tuple[str, ...]:
    """What the estimate cannot compute from the inputs, and why."""
    if scenario.model is None:
        return ("activation memory: needs the model shape (layers, hidden size); "
                "memory_per_gpu_bytes counts the training state only (a lower bound)",)
    return ()


def where(scenario, ctx, place, i: int = 0) -> dict:
    """Plan ``i``'s group of ``place``: size, nodes, GPUs per node, NIC share, text, link."""
    size, per, nodes = (float(np.asarray(x)[i]) for x in
                        (place.size, place.members_per_node, place.nodes))
    share = float(np.asarray(place.node_share)[i])
    leaves = nodes > 1
    links = ctx.links
    if not leaves:
        text = f"{size:.0f} GPUs in one node ({links.intra_name})" if size > 1 else "one GPU"
        link = links.intra_name if size > 1 else ""
    else:
        rail = _rail_text(bool(np.asarray(place.rail_aligned)[i]), per)
        text = (f"{nodes:.0f} nodes x {per:.0f} GPU(s); {share * links.gpus_per_node:g}/"
                f"{links.gpus_per_node} of each node's NICs ({rail})")
        link = links.inter_name
    return {"size": size, "nodes": nodes, "gpus_per_node": per, "leaves_node": leaves,
            "node_share": share if leaves else 0.0, "where": text, "link": link}


def _rail_text(aligned: bool, per_node: float) -> str:
    """Whether a group's inter-node traffic stays on rails (leaf switch ``i`` for local GPU ``i``)."""
    if not aligned:
        return "crosses rails"
    if per_node <= 1:
        return "same local GPU on every node: stays on its rail"
    return (f"the same {per_node:.0f} local GPUs on every node: each inter-node hop can stay on "
            "its rail")


def placement_rows(scenario, ctx, result) -> list[dict]:
    """Where each kind of group sits, for the report ("which groups leave the node")."""
    plan = scenario.plan
    places = result.detail.places if result.detail is not None else None
    deg = {"tp": np.array([plan.tp]), "cp": np.array([plan.cp]), "ep": np.array([plan.ep]),
           "dp": np.array([plan.dp]), "pp": np.array([plan.pp])}
    rows = []
    for kind in ("tp", "cp", "ep", "dp", "edp", "pp"):
        if kind == "edp" and plan.ep == 1:
            continue  # the dense gradients' group: the dp row
        place = places[kind] if places else group_placement(
            kind, deg, ctx.links.gpus_per_node, scenario.options.rank_order)
        row = {"parallelism": kind, "group": GROUP_NAME[kind], **where(scenario, ctx, place)}
        if row["size"] > 1:
            rows.append(row)
    return rows
