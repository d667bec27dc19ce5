"""Compute time of a step from its FLOPs and an efficiency; the two efficiency conventions.

Two standard ways to say how fast a GPU computes, never to be mixed up:

* **HFU** (hardware FLOPs utilisation): the fraction of the GPU's dense peak achieved on the
  FLOPs actually *executed*, recomputation included::

      compute_time = executed_flops / (hfu x peak)

* **MFU** (model FLOPs utilisation, PaLM, Chowdhery et al. 2022, appendix B): the fraction of
  peak counting only the *model's* FLOPs (forward + backward, no recomputation), so
  recomputation never changes the time an MFU implies::

      compute_time = model_flops / (mfu x peak)

  The two are related by ``hfu = mfu x executed / model``.

The reported ``mfu`` of an estimate is always ``model_flops / (step_time x peak)`` and its
``hfu`` ``executed_flops / (step_time x peak)``: whole-step figures, lower than the
compute-only efficiency given as input whenever communication, data loading or the optimizer
adds time. The handbook chapter (seeds/000) applies "50% MFU" to FLOPs that include
recomputation (its ``4 x 2 x P x tokens``): by these definitions that is an HFU of 0.5.

Within a step, forward and backward share the compute time in proportion to their executed
FLOPs: backward is twice the forward's matmul FLOPs (gradients with respect to inputs and to
weights), and recomputation adds one more forward to backward. All functions take numpy
arrays (one value per plan) as well as floats.
"""

from __future__ import annotations

import numpy as np

from willitscale.errors import ConfigError

__all__ = [
    "EFFICIENCY_KINDS",
    "compute_time",
    "utilization",
    "hfu_from_mfu",
    "forward_backward_split",
]

EFFICIENCY_KINDS = ("hfu", "mfu")


def _check_fraction(name: str, value) -> None:
    arr = np.asarray(value, dtype=float)
    if np.any(~np.isfinite(arr)) or np.any((arr <= 0) | (arr > 1)):
        raise ConfigError(name, value, "a fraction in (0, 1]")


def compute_time(*, model_flops, executed_flops, peak_flops, efficiency, kind: str):
    """Seconds to compute at ``efficiency`` of ``peak_flops``, by the convention ``kind``.

    ``kind = "hfu"``: ``executed_flops / (efficiency x peak)``; ``kind = "mfu"``:
    ``model_flops / (efficiency x peak)``.
    """
    _check_fraction(kind, efficiency)
    if kind == "hfu":
        flops = executed_flops
    elif kind == "mfu":
        flops = model_flops
    else:
        raise ConfigError("efficiency kind", kind, "hfu or mfu")
    return np.asarray(flops, dtype=float) / (np.asarray(efficiency, dtype=float) * peak_flops)


def utilization(flops, seconds, peak_flops):
    """Achieved fraction of peak: ``flops / (seconds x peak)`` (an MFU for model FLOPs)."""
    return np.asarray(flops, dtype=float) / (np.asarray(seconds, dtype=float) * peak_flops)


def hfu_from_mfu(mfu, *, model_flops, executed_flops):
    """The HFU equivalent to a given MFU for the same time: ``mfu x executed / model``."""
    return np.asarray(mfu, dtype=float) * executed_flops / model_flops


def forward_backward_split(total_time, *, forward_flops, backward_flops, recompute_flops):
    """``(forward_s, backward_s)``: ``total_time`` shared in proportion to executed FLOPs.

    ``backward_s`` includes the recomputed forward (it runs inside backward).
    """
    executed = forward_flops + backward_flops + recompute_flops
    forward = np.asarray(total_time, dtype=float) * forward_flops / executed
    return forward, np.asarray(total_time, dtype=float) - forward
