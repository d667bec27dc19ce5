"""Cluster sizing: how many GPUs train a model within a deadline, and how few can hold it.

Two questions from "GPU fabrics for GenAI workloads" (APNIC blog, 2023, tables 1-3 and the memory
paragraph), each a one-line formula; the functions accept numpy arrays (a sweep is one call).

GPUs for a deadline. Training takes ``C`` FLOPs in total; each GPU sustains ``peak x u``::

    gpus = ceil( C / (peak x u x T) )

with ``C`` either given (the article's "training ZFLOPs" column) or ``k x P x D`` for ``P``
parameters and ``D`` tokens, ``k = 6`` FLOPs per parameter per token without recomputation
(Kaplan et al. 2020, "Scaling Laws for Neural Language Models", eq. 2.1: forward 2PD + backward
4PD) and ``k = 8`` with full recomputation (one more forward). The ceiling is the article's
rounding: every row of its tables 1-3 is the next integer up (GPT-4 on A100:
31,200 ZFLOP / (624 TFLOP/s x 0.3 x 604,800 s) = 275,573.19 -> 275,574).

Fewest GPUs that hold one copy of the training state (weights, gradients, optimizer states,
without activations)::

    gpus = ceil( P x bytes_per_param / (memory x usable) )

with 16 bytes per parameter for mixed-precision Adam (ZeRO paper, Rajbhandari et al. 2020,
section 3.1: fp16 weights 2 + fp16 gradients 2 + fp32 master weights, momentum and variance
4 + 4 + 4). GPT-3: 175e9 x 16 B = 2.8 TB; on 80 GB (80e9 B) GPUs that is exactly 35, the
article's "~35 H100"; the H100's 80 GiB (85.9e9 B) makes it 33.
"""

from __future__ import annotations

import numpy as np

from willitscale.errors import ConfigError

__all__ = [
    "SECONDS_PER_WEEK",
    "training_flops",
    "gpus_for_deadline",
    "time_to_train",
    "gpus_to_hold_state",
]

SECONDS_PER_WEEK = 7 * 24 * 3600  # 604,800 s

# Below this relative excess over an integer the ceiling treats the value as that integer, so
# a ratio that is an exact integer in decimal (e.g. 2.8e12 / 80e9 = 35) is not pushed to 36 by
# binary rounding.
_CEIL_TOLERANCE = 1e-9


def _ceil(x):
    x = np.asarray(x, dtype=float)
    out = np.ceil(x * (1 - _CEIL_TOLERANCE))
    return int(out) if out.ndim == 0 else out.astype(np.int64)


def _check_positive(name: str, value) -> None:
    arr = np.asarray(value, dtype=float)
    if not np.all(np.isfinite(arr)) or np.any(arr <= 0):
        raise ConfigError(name, value, "a number > 0")


def training_flops(params, tokens, *, flops_per_param_token: float = 6.0):
    """Total training FLOPs ``k x P x D`` (``k = 6``; 8 with full recomputation)."""
    _check_positive("params", params)
    _check_positive("tokens", tokens)
    _check_positive("flops_per_param_token", flops_per_param_token)
    return flops_per_param_token * np.asarray(params, dtype=float) * tokens


def gpus_for_deadline(total_flops, *, peak_flops: float, utilization, seconds):
    """GPUs needed to run ``total_flops`` within ``seconds`` at ``utilization`` of ``peak_flops``.

    ``utilization`` is the fraction of peak achieved on the FLOPs counted in ``total_flops``
    (an MFU if they are model FLOPs, an HFU if they include recomputation).
    """
    _check_positive("total_flops", total_flops)
    _check_positive("peak_flops", peak_flops)
    _check_positive("seconds", seconds)
    u = np.asarray(utilization, dtype=float)
    if np.any((u <= 0) | (u > 1)):
        raise ConfigError("utilization", utilization, "a fraction in (0, 1]")
    return _ceil(np.asarray(total_flops, dtype=float) / (peak_flops * u * seconds))


def time_to_train(total_flops, *, gpus, peak_flops: float, utilization):
    """Seconds to run ``total_flops`` on ``gpus`` GPUs at ``utilization`` of ``peak_flops``."""
    _check_positive("gpus", gpus)
    _check_positive("peak_flops", peak_flops)
    return np.asarray(total_flops, dtype=float) / (np.asarray(gpus) * peak_flops * utilization)


def gpus_to_hold_state(params, *, bytes_per_param: float, gpu_memory: float, usable: float = 1.0):
    """Fewest GPUs whose memory holds one copy of the training state (no activations).

    ``usable`` is the fraction of each GPU's memory available to the state (the article's
    "75% efficiency" for GPT-4 is ``usable = 0.75``).
    """
    _check_positive("params", params)
    _check_positive("bytes_per_param", bytes_per_param)
    _check_positive("gpu_memory", gpu_memory)
    if not 0 < usable <= 1:
        raise ConfigError("usable memory (--usable-memory)", usable, "a fraction in (0, 1]")
    return _ceil(np.asarray(params, dtype=float) * bytes_per_param / (gpu_memory * usable))
