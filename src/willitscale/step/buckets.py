"""PyTorch DDP's gradient buckets and when their all-reduces run during backward.

How DDP does it (PyTorch ``torch/nn/parallel/distributed.py`` and
``torch/csrc/distributed/c10d/reducer.{hpp,cpp}``):

* Parameters are assigned to buckets in the reverse of their registration order, which
  approximates the order their gradients become ready in backward. A bucket is closed as soon as
  its size reaches its cap (``compute_bucket_assignment_by_size``: a tensor is added, *then* the
  size is compared with the cap), so a bucket can exceed its cap by its last tensor and a tensor
  larger than the cap still lands in one bucket.
* The caps: the first bucket ``kDefaultFirstBucketBytes = 1024 * 1024`` (1 MiB, exposed to Python
  as ``dist._DEFAULT_FIRST_BUCKET_BYTES``) so the first all-reduce starts early; every other
  bucket ``bucket_cap_mb`` converted with ``int(bucket_cap_mb * 1024 * 1024)``: the default
  "25 MB" is **25 MiB** = 26,214,400 bytes (``reducer.hpp``: ``kDefaultBucketBytesCap =
  int(25 * 1024 * 1024)``).
* A bucket is all-reduced, asynchronously on the communication stream, when every gradient in it
  is ready; buckets are launched in order, so bucket *i* starts when it is ready **and** bucket
  *i-1* has finished::

      start_i = max(ready_i, end_{i-1}),   end_i = start_i + duration_i

  The optimizer step waits for the last all-reduce: what is still running when backward ends is
  the *exposed* communication.

The recurrence has a closed form that numpy evaluates without a Python loop, over any leading
batch axes (many plans at once). With ``D_i = d_0 + ... + d_i``::

    end_i = D_i + max_{j <= i} (ready_j - D_{j-1})          (D_{-1} = 0)

i.e. ``end = cumsum(d) + maximum.accumulate(ready - (cumsum(d) - d))``. Proof by induction:
``end_i = max(ready_i, end_{i-1}) + d_i``, and unrolling the max gives the prefix maximum.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from willitscale.errors import ConfigError
from willitscale.scenario.scenario import (
    DEFAULT_BUCKET_CAP_BYTES,
    DEFAULT_FIRST_BUCKET_BYTES,
    MIB,
    MIN_BUCKET_CAP_BYTES,
)

__all__ = [
    "MIB",
    "DEFAULT_BUCKET_CAP_BYTES",
    "DEFAULT_FIRST_BUCKET_BYTES",
    "assign_buckets",
    "bucket_totals",
    "uniform_buckets",
    "uniform_bucket_runs",
    "MAX_BUCKET_ROWS",
    "MIN_BUCKET_CAP_BYTES",
    "comm_schedule",
    "last_end",
    "exposed_after",
]

#: with a parameter count only, identical full buckets beyond this many are costed in runs
#: (:func:`uniform_bucket_runs`)
MAX_BUCKET_ROWS = 4096


def _check_caps(first_cap: float, cap: float) -> None:
    if not first_cap > 0:
        raise ConfigError("first_bucket_bytes", first_cap, "a size > 0")
    if not cap > 0:
        raise ConfigError("bucket_cap_bytes", cap, "a size > 0")


def assign_buckets(tensor_bytes: Sequence[float], *, first_cap: float = DEFAULT_FIRST_BUCKET_BYTES,
                   cap: float = DEFAULT_BUCKET_CAP_BYTES) -> np.ndarray:
    """The bucket index of each gradient tensor, tensors given in the order they become ready.

    Greedy as PyTorch's ``compute_bucket_assignment_by_size``: add the tensor, close the bucket
    once its size is ``>=`` its cap (``first_cap`` for bucket 0, ``cap`` after). This depends only
    on the model's tensors and the caps, not on the cluster, so a planner computes it once per
    model shape and sharding.
    """
    _check_caps(first_cap, cap)
    index = np.empty(len(tensor_bytes), dtype=np.int64)
    bucket, filled, limit = 0, 0.0, first_cap
    for i, size in enumerate(tensor_bytes):
        index[i] = bucket
        filled += size
        if filled >= limit:
            bucket, filled, limit = bucket + 1, 0.0, cap
    return index


def bucket_totals(tensor_bytes, tensor_ready, bucket_of) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes, ready)`` per bucket: its summed size and the time its last gradient is ready."""
    bucket_of = np.asarray(bucket_of)
    n = int(bucket_of.max()) + 1 if bucket_of.size else 0
    sizes = np.bincount(bucket_of, weights=np.asarray(tensor_bytes, dtype=float), minlength=n)
    ready = np.full(n, -np.inf)
    np.maximum.at(ready, bucket_of, np.asarray(tensor_ready, dtype=float))
    return sizes, ready


def uniform_buckets(total_bytes: float, *, first_cap: float = DEFAULT_FIRST_BUCKET_BYTES,
                    cap: float = DEFAULT_BUCKET_CAP_BYTES) -> tuple[np.ndarray, np.ndarray]:
    """Bucket sizes and ready fractions when gradients appear at a uniform rate during backward.

    The back-of-envelope case (only a parameter count, no layer shapes): the first bucket holds
    ``first_cap`` bytes, the others ``cap``, the last the remainder; bucket *i* is ready when the
    fraction ``(bytes up to and including i) / total`` of backward has run. Returns
    ``(bytes, ready_fraction)``.
    """
    _check_caps(first_cap, cap)
    if total_bytes <= 0:
        return np.zeros(0), np.zeros(0)
    first = min(first_cap, total_bytes)
    rest = total_bytes - first
    full, remainder = divmod(rest, cap)
    sizes = np.concatenate([[first], np.full(int(full), float(cap)),
                            [remainder] if remainder > 0 else []])
    return sizes, np.cumsum(sizes) / total_bytes


def uniform_bucket_runs(total_bytes: float, *, first_cap: float = DEFAULT_FIRST_BUCKET_BYTES,
                        cap: float = DEFAULT_BUCKET_CAP_BYTES, max_rows: int = MAX_BUCKET_ROWS
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`uniform_buckets` with at most ``max_rows`` rows: ``(bytes, ready_fraction, count)``.

    The full buckets between the first and the remainder are identical; when there are more than
    fit, consecutive ones are taken together as one row of ``count`` buckets (``count x cap``
    bytes, ready when its last bucket is). A row's collective time is ``count x time(cap)``: each
    identical bucket is costed once and multiplied. Taking a run together launches its first
    buckets when its last is ready, so the end of the last bucket is late by at most one run's
    share of backward (``backward / max_rows``); a bucket count that large (only with a parameter
    count, e.g. 1e12 parameters in 25 MiB buckets) can no longer exhaust memory or time.
    """
    _check_caps(first_cap, cap)
    if total_bytes <= 0:
        return np.zeros(0), np.zeros(0), np.zeros(0)
    first = min(first_cap, total_bytes)
    rest = total_bytes - first
    full = math.floor(rest / cap)
    remainder = rest - full * cap
    if remainder <= cap * 1e-12:
        remainder = 0.0
    if full + 2 <= max_rows:
        counts = np.ones(full)
    else:
        per = math.ceil(full / (max_rows - 2))
        whole, left = divmod(full, per)
        counts = np.concatenate([np.full(int(whole), float(per)), [float(left)] if left else []])
    sizes = np.concatenate([[first], counts * cap, [remainder] if remainder > 0 else []])
    counts = np.concatenate([[1.0], counts, [1.0] if remainder > 0 else []])
    return sizes, np.minimum(np.cumsum(sizes) / total_bytes, 1.0), counts


def comm_schedule(ready, duration) -> tuple[np.ndarray, np.ndarray]:
    """``(start, end)`` of each bucket's all-reduce on one in-order communication stream.

    ``ready`` and ``duration`` have shape ``(..., buckets)`` (leading axes broadcast: one row per
    plan); buckets are in launch order. Implements ``start_i = max(ready_i, end_{i-1})`` with
    cumulative sums and a running maximum (see the module docstring).
    """
    ready = np.asarray(ready, dtype=float)
    duration = np.asarray(duration, dtype=float)
    ready, duration = np.broadcast_arrays(ready, duration)
    if ready.shape[-1] == 0:
        return ready.copy(), ready.copy()
    done_before = np.cumsum(duration, axis=-1)
    end = done_before + np.maximum.accumulate(ready - (done_before - duration), axis=-1)
    return end - duration, end


def last_end(ready, duration):
    """When the last bucket's all-reduce ends, without the whole schedule (planner fast path).

    From the closed form, ``end_last = max_j (ready_j + d_j + ... + d_last)``: one reversed
    cumulative sum and one maximum over the last axis.
    """
    ready = np.asarray(ready, dtype=float)
    duration = np.asarray(duration, dtype=float)
    ready, duration = np.broadcast_arrays(ready, duration)
    if ready.shape[-1] == 0:
        return np.zeros(ready.shape[:-1])
    suffix = np.flip(np.cumsum(np.flip(duration, axis=-1), axis=-1), axis=-1)
    return np.max(ready + suffix, axis=-1)


def exposed_after(comm_end, compute_end):
    """Communication still running when compute ends: ``max(0, comm_end - compute_end)``."""
    return np.maximum(0.0, np.asarray(comm_end, dtype=float) - compute_end)
