"""Scalar-or-array results: the workload functions take numpy arrays or plain numbers."""

from __future__ import annotations

import numpy as np

__all__ = ["float_or_array"]


def float_or_array(x):
    """``x`` as a Python float when it is a scalar (or 0-d array), else as the array it is."""
    return float(x) if np.ndim(x) == 0 else x
