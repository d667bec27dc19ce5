"""What a benchmark measures, one row at a time (pure, no torch).

Inside, quantities are SI (seconds, bytes, bytes/s, FLOP/s); ``to_json`` names each unit at the
boundary (``time_us``, ``busbw_GBps``) and ``from_json`` reads the same keys back, so the
results store, ``--json`` output and ``results export`` share one spelling.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from willitscale.collectives.metrics import algbw, busbw
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError
from willitscale.results.kernel_records import AttentionRow, BandwidthRow

__all__ = ["CollectiveRow", "MatmulRow", "TrainRow", "ROW_TYPES", "row_from_json", "BENCH_KINDS"]

US = 1e-6
GB = 1e9
TFLOP = 1e12


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveRow:
    """One size of one collective: nccl-tests' line (out-of-place or in-place half)."""

    kind: ClassVar[str] = "collectives"

    op: Op
    size_bytes: int  #: S, the real size after rounding (see :mod:`willitscale.bench.sweep`)
    count: int  #: elements passed to the call
    dtype: str
    redop: str  #: "sum", "max", "min" or "none" for ops that do not reduce
    root: int  #: -1 for rootless ops
    in_place: bool
    ranks: int
    time: float  #: seconds per op, reduced across ranks
    wrong: int  #: elements that failed the exact correctness check, summed over ranks
    #: whether ``wrong`` was counted: False for imported nccl-tests rows printed ``N/A``
    #: (``-c 0``) or with an old ``error`` magnitude (then ``wrong`` is 0)
    checked: bool = True

    @property
    def algbw(self) -> float:
        return float(algbw(self.size_bytes, self.time))

    @property
    def busbw(self) -> float:
        return float(busbw(self.op, self.size_bytes, self.time, self.ranks))

    @property
    def key(self) -> tuple:
        """What two runs must share for their rows to be compared."""
        return (self.op.value, self.dtype, self.redop, self.in_place, self.size_bytes)

    def to_json(self) -> dict[str, Any]:
        return {
            "op": self.op.value, "size_bytes": self.size_bytes, "count": self.count,
            "type": self.dtype, "redop": self.redop, "root": self.root,
            "in_place": self.in_place, "ranks": self.ranks,
            "time_us": self.time / US, "algbw_GBps": self.algbw / GB,
            "busbw_GBps": self.busbw / GB, "wrong": self.wrong, "checked": self.checked,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CollectiveRow:
        return cls(op=Op(data["op"]), size_bytes=int(data["size_bytes"]), count=int(data["count"]),
                   dtype=data["type"], redop=data["redop"], root=int(data["root"]),
                   in_place=bool(data["in_place"]), ranks=int(data["ranks"]),
                   time=float(data["time_us"]) * US, wrong=int(data["wrong"]),
                   checked=bool(data.get("checked", True)))


@dataclass(frozen=True, slots=True, kw_only=True)
class MatmulRow:
    """One ``(m x k) @ (k x n)`` product: ``2mnk`` FLOPs in ``time`` seconds."""

    kind: ClassVar[str] = "matmul"

    m: int
    n: int
    k: int
    dtype: str
    device: str  #: "cpu" or the GPU's name
    time: float  #: seconds per product, the slowest rank's

    @property
    def flops(self) -> float:
        return 2.0 * self.m * self.n * self.k

    @property
    def flop_rate(self) -> float:
        return self.flops / self.time

    @property
    def key(self) -> tuple:
        return (self.dtype, self.m, self.n, self.k)

    def to_json(self) -> dict[str, Any]:
        return {"m": self.m, "n": self.n, "k": self.k, "type": self.dtype, "device": self.device,
                "time_us": self.time / US, "flops": self.flops,
                "achieved_TFLOPS": self.flop_rate / TFLOP}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> MatmulRow:
        return cls(m=int(data["m"]), n=int(data["n"]), k=int(data["k"]), dtype=data["type"],
                   device=data["device"], time=float(data["time_us"]) * US)


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainRow:
    """A DDP training step of one model, its parts measured (means over steps of each step's
    slowest rank: ``step = forward + backward + optimizer``).

    ``exposed_comm`` is the backward time of a synchronising step minus that of a ``no_sync()``
    step: the gradient all-reduce time that the backward pass did not hide.
    """

    kind: ClassVar[str] = "train"

    model: str
    layers: int
    hidden: int
    heads: int
    vocab: int
    seq_len: int
    params: int
    batch_per_rank: int  #: sequences per rank per step
    ranks: int
    nodes: int
    dtype: str
    bucket_bytes: int  #: DDP bucket_cap (bytes)
    device: str
    step: float  #: seconds per synchronising step (forward + backward + optimizer)
    forward: float
    backward: float  #: with gradient synchronisation
    backward_no_sync: float  #: the same backward under ``no_sync()``
    optimizer: float
    steps: int  #: measured steps of each kind
    #: the first DDP bucket's cap (bytes); None in runs stored before it was recorded
    first_bucket_bytes: int | None = None
    #: ``torch.cuda.max_memory_allocated`` / ``max_memory_reserved`` over the measured steps,
    #: the largest of any rank (bytes); None on CPU (PyTorch keeps no such counters there) and
    #: in runs stored before they were recorded. Rows are JSON in the store: no migration.
    peak_allocated_bytes: int | None = None
    peak_reserved_bytes: int | None = None

    @property
    def exposed_comm(self) -> float:
        return max(0.0, self.backward - self.backward_no_sync)

    @property
    def tokens_per_step(self) -> int:
        return self.batch_per_rank * self.ranks * self.seq_len

    @property
    def key(self) -> tuple:
        return (self.model, self.seq_len, self.batch_per_rank, self.dtype, self.bucket_bytes)

    def to_json(self) -> dict[str, Any]:
        return {
            "model": self.model, "layers": self.layers, "hidden": self.hidden, "heads": self.heads,
            "vocab": self.vocab, "seq_len": self.seq_len, "params": self.params,
            "batch_per_rank": self.batch_per_rank, "ranks": self.ranks, "nodes": self.nodes,
            "type": self.dtype, "bucket_bytes": self.bucket_bytes, "device": self.device,
            "step_s": self.step, "forward_s": self.forward, "backward_s": self.backward,
            "backward_no_sync_s": self.backward_no_sync, "optimizer_s": self.optimizer,
            "exposed_comm_s": self.exposed_comm, "steps": self.steps,
            "tokens_per_s": self.tokens_per_step / self.step,
            "first_bucket_bytes": self.first_bucket_bytes,
            "peak_allocated_bytes": self.peak_allocated_bytes,
            "peak_reserved_bytes": self.peak_reserved_bytes,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> TrainRow:
        ints = ("layers", "hidden", "heads", "vocab", "seq_len", "params", "batch_per_rank",
                "ranks", "nodes", "bucket_bytes", "steps")
        return cls(model=data["model"], dtype=data["type"], device=data["device"],
                   **{k: int(data[k]) for k in ints},
                   step=float(data["step_s"]), forward=float(data["forward_s"]),
                   backward=float(data["backward_s"]),
                   backward_no_sync=float(data["backward_no_sync_s"]),
                   optimizer=float(data["optimizer_s"]),
                   first_bucket_bytes=_optional_int(data, "first_bucket_bytes"),
                   peak_allocated_bytes=_optional_int(data, "peak_allocated_bytes"),
                   peak_reserved_bytes=_optional_int(data, "peak_reserved_bytes"))


def _optional_int(data: Mapping[str, Any], key: str) -> int | None:
    return None if data.get(key) is None else int(data[key])


ROW_TYPES = {cls.kind: cls for cls in (CollectiveRow, MatmulRow, TrainRow, AttentionRow,
                                             BandwidthRow)}
BENCH_KINDS = tuple(ROW_TYPES)


def row_from_json(kind: str, data: Mapping[str, Any]):
    """The typed row of a stored record of benchmark ``kind``."""
    try:
        cls = ROW_TYPES[kind]
    except KeyError:
        raise ConfigError("kind", kind, "one of " + ", ".join(ROW_TYPES)) from None
    try:
        return cls.from_json(data)
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"a stored {kind} row is malformed ({type(exc).__name__}: {exc})") from None
