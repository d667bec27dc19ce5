"""The collective operations, by the names NCCL and torch.distributed use."""

from __future__ import annotations

from enum import StrEnum

from willitscale.errors import ConfigError

__all__ = ["Op", "parse_op"]


class Op(StrEnum):
    """A collective operation. ``send_recv`` is one point-to-point transfer between two ranks."""

    ALL_REDUCE = "all_reduce"
    REDUCE_SCATTER = "reduce_scatter"
    ALL_GATHER = "all_gather"
    BROADCAST = "broadcast"
    REDUCE = "reduce"
    ALL_TO_ALL = "all_to_all"
    SEND_RECV = "send_recv"


_ALIASES = {
    "allreduce": Op.ALL_REDUCE, "ar": Op.ALL_REDUCE,
    "reducescatter": Op.REDUCE_SCATTER, "rs": Op.REDUCE_SCATTER,
    "allgather": Op.ALL_GATHER, "ag": Op.ALL_GATHER,
    "alltoall": Op.ALL_TO_ALL, "a2a": Op.ALL_TO_ALL,
    "sendrecv": Op.SEND_RECV, "p2p": Op.SEND_RECV,
}


def parse_op(name: str, *, field: str = "op") -> Op:
    """An :class:`Op` from its name; ``allreduce``/``all-reduce`` spellings are accepted too."""
    key = str(name).strip().lower().replace("-", "_")
    try:
        return Op(key)
    except ValueError:
        pass
    if key.replace("_", "") in _ALIASES:
        return _ALIASES[key.replace("_", "")]
    raise ConfigError(field, name, "one of " + ", ".join(op.value for op in Op))
