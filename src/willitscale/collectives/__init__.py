"""Collective operations: names, nccl-tests metrics, alpha-beta cost per algorithm."""

from willitscale.collectives.metrics import algbw, busbw, busbw_factor
from willitscale.collectives.ops import Op, parse_op

__all__ = ["Op", "parse_op", "algbw", "busbw", "busbw_factor"]
