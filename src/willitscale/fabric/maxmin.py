"""Max-min fair rates by progressive filling (Bertsekas & Gallager, *Data Networks*, 6.5.2).

All unfrozen flows' rates rise together; when a link fills up, every flow crossing it is frozen
at its current rate; repeat until every flow is frozen. A flow may put only a fraction of its
bytes on a link (a sprayed flow splits over parallel paths): link ``e`` then carries
``sum_f frac[f, e] * rate[f]``, and the result is the weighted max-min fair allocation.

Each round is two sparse matrix-vector products over the (flows x links) incidence, so the
cost is O(nnz) per distinct bottleneck level - no loop over flows in Python.
"""

from __future__ import annotations

import numpy as np
from scipy.sparse import csr_matrix

__all__ = ["max_min_fair"]

#: a link whose remaining capacity is below this fraction of its capacity counts as full
REL_TOL = 1e-9


def max_min_fair(incidence: csr_matrix, capacity: np.ndarray, active: np.ndarray | None = None) -> np.ndarray:
    """Rates (bytes/s) of each flow (row of ``incidence``, flows x links); inactive flows get 0.

    Every active flow must cross at least one link. ``capacity`` is per link (bytes/s, > 0).
    """
    n_flows = incidence.shape[0]
    rate = np.zeros(n_flows)
    unfrozen = np.ones(n_flows, dtype=bool) if active is None else np.asarray(active, dtype=bool).copy()
    if not unfrozen.any():
        return rate
    by_link = incidence.T.tocsr()  # links x flows
    residual = np.asarray(capacity, dtype=np.float64).copy()
    full_at = REL_TOL * residual
    crosses = np.diff(incidence.indptr) > 0
    if np.any(unfrozen & ~crosses):
        raise ValueError("an active flow crosses no link")
    while unfrozen.any():
        weight = by_link @ unfrozen.astype(np.float64)  # per link: sum of fractions of unfrozen flows
        used = weight > 0
        step = np.min(residual[used] / weight[used])
        rate[unfrozen] += step
        residual -= step * weight
        full = used & (residual <= full_at)
        if not full.any():  # rounding: freeze at the tightest link
            full = used & (residual / np.where(used, weight, 1) <= (residual[used] / weight[used]).min())
        residual[full] = 0.0
        touched = (incidence @ full.astype(np.float64)) > 0
        unfrozen &= ~touched
    return rate
