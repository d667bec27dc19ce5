"""Workload: a transformer's shape, and what it costs in parameters, FLOPs and memory."""

from willitscale.workload.transformer import Transformer

__all__ = ["Transformer"]
