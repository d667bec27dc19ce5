"""Rows of the kernel benchmarks: attention per SDPA backend, HBM bandwidth of memory-bound
kernels (pure, no torch). Stored, exported and read back like the other rows
(:mod:`willitscale.results.records`): SI inside, the unit in every JSON key.

FLOPs of one attention call (``batch x heads`` independent heads of ``seq x head_dim``):

* forward: two products per head, ``S = Q K^T`` (``2 s^2 d``) and ``O = P V`` (``2 s^2 d``):
  ``4 b h s^2 d``;
* backward: five products per head -- ``S`` recomputed, ``dV = P^T dO``, ``dP = dO V^T``,
  ``dQ = dS K``, ``dK = dS^T Q`` -- ``10 b h s^2 d``, 2.5x the forward (the count FlashAttention-2
  reports its backward by: Dao 2023, "FlashAttention-2", section 4.1);
* causal: the kernels skip the blocks above the diagonal, so they execute about half of it:
  the count is halved (the FLOPs the kernel executes, what a measured profile's ``[[attention]]``
  curve is a rate of). The unfused MATH backend computes the masked half and throws it away: its
  rows use the same halved count, so its rate is what it achieves on the useful work.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from willitscale.errors import ConfigError

__all__ = ["AttentionRow", "BandwidthRow", "attention_flops", "ATTENTION_STATUSES",
           "ATTENTION_DIRECTIONS"]

US = 1e-6
GB = 1e9
TFLOP = 1e12
ATTENTION_STATUSES = ("ok", "unsupported", "skipped")
ATTENTION_DIRECTIONS = ("forward", "backward")
#: products per head per pass, in units of ``2 s^2 d`` (see the module docstring)
_PRODUCTS = {"forward": 2, "backward": 5}


def attention_flops(*, batch: int, heads: int, seq_len: int, head_dim: int, causal: bool,
                    direction: str) -> float:
    """FLOPs the attention kernel executes in one call (module docstring)."""
    if direction not in _PRODUCTS:
        raise ConfigError("direction", direction, "forward or backward")
    full = _PRODUCTS[direction] * 2.0 * batch * heads * float(seq_len) ** 2 * head_dim
    return full / 2 if causal else full


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionRow:
    """One SDPA call of one backend, pass and shape: its time, or why it did not run."""

    kind: ClassVar[str] = "attention"

    backend: str  #: torch.nn.attention.SDPBackend name: FLASH_ATTENTION, CUDNN_ATTENTION, ...
    direction: str  #: "forward" or "backward"
    causal: bool
    dtype: str
    batch: int
    heads: int
    seq_len: int
    head_dim: int
    device: str
    status: str = "ok"  #: "ok", "unsupported" (the backend cannot run it) or "skipped"
    reason: str = ""  #: why not "ok", as torch said it
    time: float | None = None  #: seconds per call, the slowest rank's; None unless "ok"

    def __post_init__(self) -> None:
        if self.status not in ATTENTION_STATUSES:
            raise ConfigError("status", self.status, "one of " + ", ".join(ATTENTION_STATUSES))
        if (self.status == "ok") != (self.time is not None and self.time > 0):
            raise ConfigError("time", self.time, "a time > 0 exactly when the status is ok")

    @property
    def flops(self) -> float:
        return attention_flops(batch=self.batch, heads=self.heads, seq_len=self.seq_len,
                               head_dim=self.head_dim, causal=self.causal, direction=self.direction)

    @property
    def flop_rate(self) -> float | None:
        return None if self.time is None else self.flops / self.time

    @property
    def key(self) -> tuple:
        return (self.backend, self.direction, self.causal, self.dtype, self.head_dim,
                self.batch, self.heads, self.seq_len)

    def to_json(self) -> dict[str, Any]:
        rate = self.flop_rate
        return {"backend": self.backend, "direction": self.direction, "causal": self.causal,
                "type": self.dtype, "batch": self.batch, "heads": self.heads,
                "seq_len": self.seq_len, "head_dim": self.head_dim, "device": self.device,
                "status": self.status, "reason": self.reason,
                "time_us": None if self.time is None else self.time / US, "flops": self.flops,
                "achieved_TFLOPS": None if rate is None else rate / TFLOP}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AttentionRow:
        time_us = data.get("time_us")
        return cls(backend=data["backend"], direction=data["direction"],
                   causal=bool(data["causal"]), dtype=data["type"], batch=int(data["batch"]),
                   heads=int(data["heads"]), seq_len=int(data["seq_len"]),
                   head_dim=int(data["head_dim"]), device=data["device"],
                   status=data.get("status", "ok"), reason=data.get("reason", ""),
                   time=None if time_us is None else float(time_us) * US)


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthRow:
    """One memory-bound kernel over one size: the bytes it must move (read + write, counted
    from its operands, not measured) and the time; bandwidth = bytes / time (one direction:
    HBM reads and writes share the bus)."""

    kind: ClassVar[str] = "bandwidth"

    op: str  #: "copy", "add", "layer_norm", "adamw", ...
    elements: int  #: elements of the operand tensors
    dtype: str
    size_bytes: int  #: bytes read + written by one call
    device: str
    time: float  #: seconds per call, the slowest rank's

    def __post_init__(self) -> None:
        if not (self.time > 0 and self.size_bytes > 0):
            raise ConfigError("time", self.time, "a time > 0 and bytes > 0")

    @property
    def bandwidth(self) -> float:
        return self.size_bytes / self.time

    @property
    def key(self) -> tuple:
        return (self.op, self.dtype, self.elements)

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "elements": self.elements, "type": self.dtype,
                "size_bytes": self.size_bytes, "device": self.device, "time_us": self.time / US,
                "achieved_GBps": self.bandwidth / GB}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BandwidthRow:
        return cls(op=data["op"], elements=int(data["elements"]), dtype=data["type"],
                   size_bytes=int(data["size_bytes"]), device=data["device"],
                   time=float(data["time_us"]) * US)
