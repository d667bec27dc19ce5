"""Options of the kernel benchmarks (``bench attention``, ``bench bandwidth``): flags, validated
frozen dataclasses, JSON -- the same round trip as :mod:`willitscale.bench.options` (pure).

:data:`BENCH_OPTION_TYPES` is every benchmark's option class by kind, these two included.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from willitscale.bench.options import (
    OPTION_TYPES,
    _csv,
    _Defaults,
    _Options,
    add_common_args,
    parse_dtype,
)
from willitscale.errors import ConfigError

__all__ = ["AttentionOptions", "BandwidthOptions", "SDPA_BACKENDS", "BANDWIDTH_OPS",
           "BENCH_OPTION_TYPES", "add_attention_args", "add_bandwidth_args", "kernel_options_from_args"]

#: torch.nn.attention.SDPBackend names, by the short name a flag takes
SDPA_BACKENDS = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION",
                 "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}
CAUSAL_MODES = {"both": (True, False), "causal": (True,), "full": (False,)}
#: memory-bound kernels of a training step, each timed as bytes moved over time
BANDWIDTH_OPS = ("copy", "add", "layer_norm", "gelu", "adamw")
_POWERS_512_TO_16K = (512, 1024, 2048, 4096, 8192, 16384)


def _ints(text: str, field: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in _csv(text))
    except ValueError:
        raise ConfigError(field, text, "comma-separated integers") from None
    if not values or min(values) < 1:
        raise ConfigError(field, text, "comma-separated integers >= 1")
    return values


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionOptions(_Options):
    """SDPA forward and backward over backends, causality, head dims and sequence lengths.

    Each sequence length runs ``tokens // seq_len`` sequences (at least one) of
    ``hidden // head_dim`` heads: the FlashAttention-2 paper's benchmark setting (Dao 2023,
    section 4.1: hidden 2048, 16k tokens per batch), so every point does comparable work."""

    backends: tuple[str, ...] = tuple(SDPA_BACKENDS.values())
    causal: tuple[bool, ...] = (True, False)
    head_dims: tuple[int, ...] = (64, 128)
    seq_lens: tuple[int, ...] = _POWERS_512_TO_16K
    directions: tuple[str, ...] = ("forward", "backward")
    dtype: str = "bfloat16"
    hidden: int = 2048
    tokens: int = 16384
    math_max_seq: int = 8192  #: the unfused MATH backend stores s^2 scores: skipped above this
    warmup: int = 3
    iters: int = 10
    backend: str = "auto"

    def __post_init__(self) -> None:
        names = tuple(SDPA_BACKENDS.get(b.lower(), b.upper()) for b in self.backends)
        bad = [b for b in names if b not in SDPA_BACKENDS.values()]
        if bad or not names:
            raise ConfigError("backends", ",".join(self.backends),
                              "comma-separated: " + ", ".join(SDPA_BACKENDS))
        object.__setattr__(self, "backends", names)
        object.__setattr__(self, "causal", tuple(bool(c) for c in self.causal))
        object.__setattr__(self, "dtype", parse_dtype(self.dtype))
        if self.dtype not in ("bfloat16", "float16", "float32"):
            raise ConfigError("dtype", self.dtype, "bfloat16, float16 or float32")
        bad_dir = [d for d in self.directions if d not in ("forward", "backward")]
        if bad_dir or not self.directions:
            raise ConfigError("directions", self.directions, "forward and/or backward")
        for name in ("head_dims", "seq_lens"):
            if not getattr(self, name) or min(getattr(self, name)) < 1:
                raise ConfigError(name, getattr(self, name), "integers >= 1")
        for d in self.head_dims:
            if self.hidden % d:
                raise ConfigError("head_dims", d, f"a divisor of hidden = {self.hidden}")
        for name in ("hidden", "tokens", "math_max_seq", "iters"):
            if getattr(self, name) < 1:
                raise ConfigError(name, getattr(self, name), "an integer >= 1")
        if self.warmup < 0:
            raise ConfigError("warmup", self.warmup, "an integer >= 0")

    def batch_for(self, seq_len: int) -> int:
        return max(1, self.tokens // seq_len)


@dataclass(frozen=True, slots=True, kw_only=True)
class BandwidthOptions(_Options):
    """Memory-bound kernels over tensor sizes (elements), timed as bytes over time."""

    ops: tuple[str, ...] = BANDWIDTH_OPS
    sizes: tuple[int, ...] = tuple(2**p for p in range(20, 29, 2))  #: elements: 1M .. 256M
    dtype: str = "bfloat16"
    hidden: int = 4096  #: layer_norm's row length
    warmup: int = 3
    iters: int = 20
    backend: str = "auto"

    def __post_init__(self) -> None:
        bad = [o for o in self.ops if o not in BANDWIDTH_OPS]
        if bad or not self.ops:
            raise ConfigError("ops", ",".join(self.ops), "comma-separated: " + ", ".join(BANDWIDTH_OPS))
        object.__setattr__(self, "dtype", parse_dtype(self.dtype))
        if self.dtype not in ("bfloat16", "float16", "float32"):
            raise ConfigError("dtype", self.dtype, "bfloat16, float16 or float32")
        if not self.sizes or min(self.sizes) < 1:
            raise ConfigError("sizes", self.sizes, "element counts >= 1")
        if self.hidden < 1 or self.iters < 1 or self.warmup < 0:
            raise ConfigError("iters", self.iters, "hidden >= 1, iters >= 1, warmup >= 0")


BENCH_OPTION_TYPES = {**OPTION_TYPES, "attention": AttentionOptions, "bandwidth": BandwidthOptions}


def add_attention_args(p: argparse.ArgumentParser) -> None:
    d = _Defaults(AttentionOptions)
    p.add_argument("--backends", default="flash,cudnn,efficient,math",
                   help="SDPA backends: " + ", ".join(SDPA_BACKENDS))
    p.add_argument("--causal", choices=tuple(CAUSAL_MODES), default="both",
                   help="causal masking, full attention, or both")
    p.add_argument("--head-dims", default="64,128", help="comma-separated head dimensions")
    p.add_argument("--seq-lens", default=",".join(map(str, _POWERS_512_TO_16K)),
                   help="comma-separated sequence lengths (e.g. up to 131072)")
    p.add_argument("--directions", default="forward,backward", help="forward, backward or both")
    p.add_argument("--dtype", default=d.dtype, help="bfloat16, float16 or float32")
    p.add_argument("--hidden", type=int, default=d.hidden, help="heads = hidden / head dim")
    p.add_argument("--tokens", type=int, default=d.tokens, help="sequences = tokens / seq len")
    p.add_argument("--math-max-seq", type=int, default=d.math_max_seq,
                   help="longest sequence the unfused MATH backend runs (it stores s^2 scores)")
    p.add_argument("-w", "--warmup", type=int, default=d.warmup)
    p.add_argument("-n", "--iters", type=int, default=d.iters)
    add_common_args(p)


def add_bandwidth_args(p: argparse.ArgumentParser) -> None:
    d = _Defaults(BandwidthOptions)
    p.add_argument("--ops", default=",".join(BANDWIDTH_OPS), help="comma-separated: " + ", ".join(BANDWIDTH_OPS))
    p.add_argument("--sizes", default=",".join(map(str, d.sizes)), help="element counts")
    p.add_argument("--dtype", default=d.dtype, help="bfloat16, float16 or float32")
    p.add_argument("--hidden", type=int, default=d.hidden, help="layer_norm's row length")
    p.add_argument("-w", "--warmup", type=int, default=d.warmup)
    p.add_argument("-n", "--iters", type=int, default=d.iters)
    add_common_args(p)


def kernel_options_from_args(kind: str, args: argparse.Namespace):
    if kind == "attention":
        return AttentionOptions(
            backends=tuple(_csv(args.backends)), causal=CAUSAL_MODES[args.causal],
            head_dims=_ints(args.head_dims, "head_dims"), seq_lens=_ints(args.seq_lens, "seq_lens"),
            directions=tuple(_csv(args.directions)), dtype=args.dtype, hidden=args.hidden,
            tokens=args.tokens, math_max_seq=args.math_max_seq, warmup=args.warmup,
            iters=args.iters, backend=args.backend)
    if kind == "bandwidth":
        return BandwidthOptions(ops=tuple(_csv(args.ops)), sizes=_ints(args.sizes, "sizes"),
                                dtype=args.dtype, hidden=args.hidden, warmup=args.warmup,
                                iters=args.iters, backend=args.backend)
    raise ConfigError("kind", kind, "attention or bandwidth")
