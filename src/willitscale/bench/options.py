"""The options of each benchmark: argparse flags, validated frozen dataclasses, JSON (pure).

The same options reach a worker three ways: parsed from its own command line (``torchrun -m
willitscale.bench collectives -b 1MB ...``), handed over by the built-in spawner as JSON in
:data:`OPTIONS_ENV`, or stored with a run. ``to_json``/``from_json`` round-trip exactly.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any

from willitscale.errors import ConfigError
from willitscale.units import parse_size

__all__ = ["DTYPES", "CollectiveOptions", "MatmulOptions", "TrainOptions", "OPTIONS_ENV",
           "parse_dtype", "nccl_tests_size", "time_reduction", "add_collective_args", "add_matmul_args", "add_train_args",
           "options_from_args", "OPTION_TYPES"]

OPTIONS_ENV = "WILLITSCALE_BENCH_OPTIONS"

#: canonical dtype -> (bytes per element, largest integer every value up to which is exact)
DTYPES: dict[str, tuple[int, int]] = {
    "float32": (4, 2**24), "float16": (2, 2**11), "bfloat16": (2, 2**8), "float64": (8, 2**53),
    "int32": (4, 2**31 - 1), "int64": (8, 2**63 - 1), "int8": (1, 127), "uint8": (1, 255),
}
_DTYPE_ALIASES = {"float": "float32", "fp32": "float32", "half": "float16", "fp16": "float16",
                  "bf16": "bfloat16", "double": "float64", "fp64": "float64"}
REDOPS = ("sum", "max", "min")
MODES = ("out-of-place", "in-place", "both")
TIME_REDUCTIONS = ("max", "mean", "min", "rank0")
BACKENDS = ("auto", "nccl", "gloo")


def parse_dtype(name: str, *, field: str = "dtype") -> str:
    key = str(name).strip().lower()
    key = _DTYPE_ALIASES.get(key, key)
    if key not in DTYPES:
        raise ConfigError(field, name, "one of " + ", ".join([*DTYPES, *_DTYPE_ALIASES]))
    return key


def _size(text: str, field: str) -> int:
    value = parse_size(text, field=field)
    if value != int(value):
        raise ConfigError(field, text, "a whole number of bytes")
    return int(value)


_NCCL_SIZE = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(\S?)")
_NCCL_UNITS = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30}


def nccl_tests_size(text: str, field: str) -> int:
    """A size as nccl-tests reads ``-b``/``-e``/``-i`` (src/common.cu ``parsesize``: a number,
    then K, M or G in either case meaning 2^10, 2^20, 2^30; anything after that letter is
    ignored, so ``128MB`` is 128 x 2^20; a bare number is bytes)."""
    m = _NCCL_SIZE.match(str(text))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _NCCL_UNITS:
        raise ConfigError(field, text, "a size as nccl-tests reads it: a number of bytes, or "
                                       "with K, M or G (2^10, 2^20, 2^30), e.g. 8, 128M, 1G")
    value = float(m.group(1)) * _NCCL_UNITS[unit]
    if value < 1 or value != int(value):
        raise ConfigError(field, text, "a whole number of bytes >= 1")
    return int(value)


#: nccl-tests' -a numbers (0 = rank 0, 1 = average, 2 = min, 3 = max)
_NCCL_AVERAGE = {"0": "rank0", "1": "mean", "2": "min", "3": "max"}


def time_reduction(text: str) -> str:
    """``-a``: max, mean, min, rank0, or nccl-tests' numbers 0-3."""
    value = _NCCL_AVERAGE.get(str(text).strip(), str(text).strip().lower())
    if value not in TIME_REDUCTIONS:
        raise ConfigError("-a/--time-reduce", text, "max, mean, min, rank0, or nccl-tests' "
                                                    "0 (rank 0), 1 (mean), 2 (min), 3 (max)")
    return value


def _one(value: int | None, flag: str) -> None:
    if value not in (None, 1):
        raise ConfigError(flag, value, "1: willitscale runs one process per GPU (nccl-tests' "
                                       "-g 1 -t 1); start more ranks with --nproc or torchrun")


class _Options:
    """Shared JSON round trip of the option dataclasses."""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)  # type: ignore[call-overload]
        return {k: (list(v) if isinstance(v, tuple) else v) for k, v in data.items()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]):
        names = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = set(data) - names
        if unknown:
            raise ConfigError(f"{cls.__name__}: unknown options {sorted(unknown)}")
        return cls(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in data.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveOptions(_Options):
    """A collective sweep, with nccl-tests' meaning for every option."""

    ops: tuple[str, ...] = ("all_reduce",)
    min_bytes: int = 1_000_000
    max_bytes: int = 64_000_000
    factor: float | None = 2.0
    step_bytes: int | None = None
    dtype: str = "float32"
    redop: str = "sum"
    root: int = 0
    warmup: int = 5
    iters: int = 20
    mode: str = "out-of-place"
    check: bool = True
    time_reduce: str = "max"
    backend: str = "auto"

    def __post_init__(self) -> None:
        from willitscale.collectives.ops import (
            parse_op,  # the package imports numpy: not at --help
        )

        object.__setattr__(self, "ops", tuple(parse_op(o, field="ops").value for o in self.ops))
        object.__setattr__(self, "dtype", parse_dtype(self.dtype))
        for name, choices in (("redop", REDOPS), ("mode", MODES),
                              ("time_reduce", TIME_REDUCTIONS), ("backend", BACKENDS)):
            if getattr(self, name) not in choices:
                raise ConfigError(name, getattr(self, name), "one of " + ", ".join(choices))
        if self.warmup < 0:
            raise ConfigError("warmup", self.warmup, "an integer >= 0")
        if self.iters < 1:
            raise ConfigError("iters", self.iters, "an integer >= 1")
        if self.root < 0:
            raise ConfigError("root", self.root, "a rank >= 0")
        from willitscale.bench.sweep import sweep_sizes

        sweep_sizes(self.min_bytes, self.max_bytes, factor=self.factor, step_bytes=self.step_bytes)

    @property
    def op_list(self) -> list:
        from willitscale.collectives.ops import Op

        return [Op(o) for o in self.ops]

    @property
    def in_place_modes(self) -> list[bool]:
        return {"out-of-place": [False], "in-place": [True], "both": [False, True]}[self.mode]


#: FP8 products through ``torch._scaled_mm`` (bench.scaled_mm), by flag spelling: E4M3 inputs,
#: one scale per tensor or one per row of A and column of B, bfloat16 output
FP8_MATMUL = {name: canonical for canonical in ("float8_e4m3fn-tensorwise", "float8_e4m3fn-rowwise")
              for name in (canonical, canonical.replace("float8_e4m3fn", "fp8"))}


@dataclass(frozen=True, slots=True, kw_only=True)
class MatmulOptions(_Options):
    """Square (or ``MxNxK``) matrix products over sizes and dtypes."""

    shapes: tuple[tuple[int, int, int], ...] = ((256, 256, 256), (512, 512, 512),
                                                 (1024, 1024, 1024), (2048, 2048, 2048))
    dtypes: tuple[str, ...] = ("float32",)
    warmup: int = 3
    iters: int = 10
    backend: str = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "shapes", tuple(tuple(int(x) for x in s) for s in self.shapes))
        object.__setattr__(self, "dtypes", tuple(FP8_MATMUL.get(str(d).lower()) or parse_dtype(d, field="dtypes")
                                                 for d in self.dtypes))
        if any(len(s) != 3 or min(s) < 1 for s in self.shapes):
            raise ConfigError("sizes", self.shapes, "sizes >= 1, as N or MxNxK")
        if self.iters < 1 or self.warmup < 0:
            raise ConfigError("iters", self.iters, "iters >= 1 and warmup >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class TrainOptions(_Options):
    """A DDP training step of a GPT-2-family model built in :mod:`willitscale.bench.gpt`."""

    model: str = "gpt2-tiny"
    seq_len: int = 128
    batch: int = 4  #: sequences per rank per step
    steps: int = 10  #: measured steps of each kind (synchronising and no_sync)
    warmup: int = 3
    bucket_bytes: int = 25 * 2**20  #: DDP bucket_cap; torch's default is 25 MiB
    dtype: str = "float32"  #: parameters and gradients; bfloat16/float16 use autocast on GPU
    seed: int = 0
    backend: str = "auto"

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", parse_dtype(self.dtype))
        if self.dtype not in ("float32", "bfloat16", "float16"):
            raise ConfigError("dtype", self.dtype, "float32, bfloat16 or float16")
        for name in ("seq_len", "batch", "steps", "bucket_bytes"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "an integer >= 1")
        if self.warmup < 0:
            raise ConfigError("warmup", self.warmup, "an integer >= 0")
        from willitscale.bench.models import bench_model

        shape = bench_model(self.model)
        if self.seq_len > shape.max_positions:
            raise ConfigError("seq_len", self.seq_len, f"at most {shape.max_positions} for {self.model}")


OPTION_TYPES = {"collectives": CollectiveOptions, "matmul": MatmulOptions, "train": TrainOptions}


# ------------------------------------------------------------------------------ argparse


def _csv(text: str) -> list[str]:
    return [t for t in (p.strip() for p in text.split(",")) if t]


def _shape(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    try:
        dims = [int(p) for p in parts]
    except ValueError:
        raise ConfigError("sizes", text, "N or MxNxK with integers, e.g. 1024 or 4096x4096x1024") from None
    if len(dims) == 1:
        dims = dims * 3
    if len(dims) != 3:
        raise ConfigError("sizes", text, "N or MxNxK")
    return (dims[0], dims[1], dims[2])


class _Defaults:
    """An option dataclass's field defaults, without constructing (and validating) one."""

    def __init__(self, cls):
        self._values = {f.name: f.default for f in fields(cls)}

    def __getattr__(self, name: str):
        return self._values[name]


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--backend", choices=BACKENDS, default="auto",
                   help="torch.distributed backend (auto: nccl with CUDA, else gloo)")


def add_collective_args(p: argparse.ArgumentParser) -> None:
    d = _Defaults(CollectiveOptions)
    p.add_argument("--ops", default="all_reduce",
                   help="comma-separated: all_reduce, all_gather, reduce_scatter, broadcast, "
                        "reduce, all_to_all, send_recv, or 'all' (default all_reduce)")
    p.add_argument("-b", "--min-bytes", default=None,
                   help="smallest size (default 1MB); MB = 10^6 B, MiB = 2^20 B, a bare number "
                        "is bytes. With --format nccl-tests, as nccl-tests reads it: 128M = "
                        "128 x 2^20 B, K and G likewise (default 32M, nccl-tests')")
    p.add_argument("-e", "--max-bytes", default=None,
                   help="largest size (default 64MB; with --format nccl-tests 32M)")
    p.add_argument("-f", "--factor", type=float, default=None,
                   help="size multiplier (default 2; with --format nccl-tests, as there: none, "
                        "sizes step by -i)")
    p.add_argument("-i", "--step-bytes", default=None,
                   help="size increment, instead of a factor (with --format nccl-tests: "
                        "default 1M = 2^20 B when no -f)")
    p.add_argument("-g", "--ngpus", type=int, default=None,
                   help="nccl-tests' GPUs per thread: only 1 (one process per GPU)")
    p.add_argument("-t", "--nthreads", type=int, default=None,
                   help="nccl-tests' threads per process: only 1")
    p.add_argument("-d", "--dtype", default=d.dtype, help="float32, float16, bfloat16, float64, int32, ...")
    p.add_argument("-o", "--redop", default=d.redop, choices=REDOPS, help="reduction operator")
    p.add_argument("-r", "--root", type=int, default=d.root, help="root rank of broadcast and reduce")
    p.add_argument("-w", "--warmup", type=int, default=d.warmup, help="untimed iterations first")
    p.add_argument("-n", "--iters", type=int, default=d.iters, help="timed back-to-back ops per size")
    p.add_argument("--mode", choices=MODES, default=None,
                   help="buffers: out-of-place (default), in-place, or both (nccl-tests prints "
                        "both: the default with --format nccl-tests)")
    p.add_argument("-c", "--check", type=int, choices=(0, 1), default=1,
                   help="check every result exactly (1) or not (0)")
    p.add_argument("-a", "--time-reduce", type=time_reduction, default=d.time_reduce,
                   help="combine the ranks' times by max (default), mean (nccl-tests' default), "
                        "min or rank0; nccl-tests' numbers 0-3 work too")
    add_common_args(p)


def add_matmul_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--sizes", default="256,512,1024,2048", help="comma-separated N or MxNxK")
    p.add_argument("--dtypes", default="float32",
                   help="comma-separated dtypes; fp8-tensorwise and fp8-rowwise run torch._scaled_mm")
    p.add_argument("-w", "--warmup", type=int, default=_Defaults(MatmulOptions).warmup)
    p.add_argument("-n", "--iters", type=int, default=_Defaults(MatmulOptions).iters)
    add_common_args(p)


def add_train_args(p: argparse.ArgumentParser) -> None:
    from willitscale.bench.models import BENCH_MODEL_NAMES

    d = _Defaults(TrainOptions)
    p.add_argument("--model", default=d.model, help="one of " + ", ".join(BENCH_MODEL_NAMES))
    p.add_argument("--seq-len", type=int, default=d.seq_len)
    p.add_argument("--batch", type=int, default=d.batch, help="sequences per rank per step")
    p.add_argument("--steps", type=int, default=d.steps, help="measured steps of each kind")
    p.add_argument("-w", "--warmup", type=int, default=d.warmup)
    p.add_argument("--bucket-size", default="25MiB", help="DDP bucket_cap (torch default 25MiB)")
    p.add_argument("--dtype", default=d.dtype, help="float32, or bfloat16/float16 autocast on GPU")
    p.add_argument("--seed", type=int, default=d.seed)
    add_common_args(p)


def options_from_args(kind: str, args: argparse.Namespace):
    """The validated options of benchmark ``kind`` from parsed flags."""
    if kind == "collectives":
        return _collective_options(args)
    if kind == "matmul":
        return MatmulOptions(shapes=tuple(_shape(s) for s in _csv(args.sizes)),
                             dtypes=tuple(_csv(args.dtypes)), warmup=args.warmup,
                             iters=args.iters, backend=args.backend)
    if kind == "train":
        return TrainOptions(model=args.model, seq_len=args.seq_len, batch=args.batch,
                            steps=args.steps, warmup=args.warmup,
                            bucket_bytes=_size(args.bucket_size, "bucket_size"), dtype=args.dtype,
                            seed=args.seed, backend=args.backend)
    raise ConfigError("kind", kind, "one of " + ", ".join(OPTION_TYPES))


def _collective_options(args: argparse.Namespace) -> CollectiveOptions:
    """The sweep's options; with ``--format nccl-tests`` sizes and defaults are nccl-tests'."""
    from willitscale.collectives.ops import Op

    nccl = getattr(args, "format", "table") == "nccl-tests"
    _one(getattr(args, "ngpus", None), "-g/--ngpus")
    _one(getattr(args, "nthreads", None), "-t/--nthreads")
    size = nccl_tests_size if nccl else _size
    ops = [o.value for o in Op] if args.ops.strip().lower() == "all" else _csv(args.ops)
    step = size(args.step_bytes, "step_bytes") if args.step_bytes else None
    if nccl and args.factor is None and step is None:
        step = 2**20  # nccl-tests' default -i 1M when no -f (README "Arguments")
    factor = args.factor if args.factor is not None else (None if step else 2.0)
    default_min, default_max = ("32M", "32M") if nccl else ("1MB", "64MB")
    return CollectiveOptions(
        ops=tuple(ops), min_bytes=size(args.min_bytes or default_min, "min_bytes"),
        max_bytes=size(args.max_bytes or default_max, "max_bytes"), factor=factor,
        step_bytes=step, dtype=args.dtype, redop=args.redop, root=args.root, warmup=args.warmup,
        iters=args.iters, mode=args.mode or ("both" if nccl else "out-of-place"),
        check=bool(args.check), time_reduce=args.time_reduce, backend=args.backend)
