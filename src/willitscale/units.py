"""Units: parse human strings at the edge, format numbers for people.

Inside the code every quantity is a plain float in SI base units: bytes, seconds, bytes/s,
FLOPs, FLOP/s. This module is the only place that knows about prefixes and suffixes.

Conventions (the field's classic slips, made explicit):

* ``k M G T P`` are powers of 10 (GB = 10^9 bytes, as nccl-tests reports); ``Ki Mi Gi Ti Pi``
  are powers of 2 (GiB = 2^30 bytes).
* A lower-case ``b`` is a bit, an upper-case ``B`` a byte: ``200Gbps`` = ``200 Gb/s`` =
  25 GB/s, ``25GBps`` = ``25 GB/s``. ``Mbit``/``Gbit`` (the ``tc`` spelling) are bits too.
  Bandwidth prefixes may be lower case (``200gbps``, ``100mbit``: there is no milli-bandwidth).
* A bandwidth is one direction. A figure quoted for both directions together is accepted only
  when labelled as such (``"600GB/s duplex"``, ``"900 GB/s bidirectional"``) and is halved.
* A bare number is accepted where its unit is unambiguous: sizes (bytes) and counts. A bare
  non-zero number for a bandwidth or a time is rejected: ``--latency 2`` could be seconds or
  microseconds, so we ask.
"""

from __future__ import annotations

import math
import re

from willitscale.errors import ConfigError

__all__ = [
    "parse_size",
    "parse_bandwidth",
    "parse_time",
    "parse_flop_rate",
    "parse_count",
    "parse_ports",
    "format_size",
    "format_bandwidth",
    "format_time",
    "format_flops",
    "format_flop_rate",
    "format_count",
    "BITS_PER_BYTE",
]

BITS_PER_BYTE = 8

_DECIMAL = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18}
_BINARY = {"Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50}

_NUMBER = r"(?P<num>[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)"
_PREFIX = r"(?P<prefix>Ki|Mi|Gi|Ti|Pi|[kKMGTPE]?)"

_SIZE_RE = re.compile(rf"^{_NUMBER}\s*(?:{_PREFIX}(?P<unit>B|b|bytes?|bits?|bit))?$")
_BW_PREFIX = r"(?P<prefix>Ki|Mi|Gi|Ti|Pi|[kKmMgGtTpPeE]?)"  # no milli-bandwidth: "mbps" is mega
_BW_RE = re.compile(
    rf"^{_NUMBER}\s*{_BW_PREFIX}(?P<unit>bps|Bps|b/s|B/s|bit/s|bits/s|bit|byte/s|bytes/s)"
    r"(?:\s*\(?\s*(?P<label>duplex|bidirectional|bi-directional|bidir|unidirectional|"
    r"one[- ]direction|per[- ]direction)\s*\)?)?$"
)
_TIME_UNITS = {
    "ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "sec": 1.0,
    "min": 60.0, "h": 3600.0, "d": 86400.0, "day": 86400.0, "days": 86400.0,
    "w": 604800.0, "week": 604800.0, "weeks": 604800.0,
}
_TIME_RE = re.compile(rf"^{_NUMBER}\s*(?P<unit>[a-zµμ]*)$")
_RATE_RE = re.compile(rf"^{_NUMBER}\s*{_PREFIX}(?P<unit>FLOPS|FLOP/s|flops|flop/s|FLOPs/s)?$")
_COUNT_RE = re.compile(rf"^{_NUMBER}\s*(?P<suffix>[kKMBTG]?)$")
_COUNT_SUFFIX = {"": 1.0, "k": 1e3, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}
_PORTS_RE = re.compile(r"^\s*(?P<count>\d+)\s*[xX×*]\s*(?P<rest>.+)$")


def _scale(prefix: str) -> float:
    return _BINARY[prefix] if prefix in _BINARY else _DECIMAL[prefix]


def _finite(value: float, field: str, text: object, expected: str) -> float:
    if not math.isfinite(value):
        raise ConfigError(field, text, expected)
    return value


def _text_of(value: object, field: str, expected: str) -> str:
    if isinstance(value, bool):  # bool is an int; never a quantity
        raise ConfigError(field, value, expected)
    return str(value).strip()


def _checked(num: float, field: str, value: object, quantity: str, expected: str,
             positive: bool = False) -> float:
    """``num`` if it is a finite quantity >= 0 (> 0 when ``positive``), else the error naming
    the field and the bound that holds (``> 0`` where 0 is refused too)."""
    if num < 0 or (positive and num == 0):
        raise ConfigError(field, value, f"{quantity} {'> 0' if positive else '>= 0'}")
    return _finite(num, field, value, expected)


def parse_size(value: str | float | int, *, field: str = "size", unit_required: bool = False,
               positive: bool = False, bits: bool = True) -> float:
    """Bytes from ``"80GiB"``, ``"1.4GB"``, ``"97.5 MB"``, ``"2560Gb"`` (bits) or a bare byte count.

    ``unit_required``: a bare non-zero number in a string (``"80"``, from a flag whose name does
    not say bytes) is an error, not 80 bytes: ``--gpu-memory 80`` means 80 GB to its writer.
    ``bits=False`` (memory capacities): a size in bits (``"80Gb"``) is refused, not read as
    10 GB: nobody sizes memory in bits, so a lowercase b there is a typo for B."""
    expected = "a size such as 1.4GB, 80GiB, 512MiB or a number of bytes"
    text = _text_of(value, field, expected)
    if unit_required and isinstance(value, str) and _is_number(text) and not _is_zero(text):
        raise ConfigError(field, value, "a size with a unit, such as 80GB, 80GiB or 25MiB "
                                        "(a bare number is ambiguous: B = byte, b = bit)")
    m = _SIZE_RE.match(text)
    if not m:
        raise ConfigError(field, value, expected)
    num = float(m["num"]) * _scale(m["prefix"] or "")
    unit = m["unit"] or "B"
    if unit.startswith("b"):  # b, bit, bits
        if not bits:
            raise ConfigError(field, value, f"a size in bytes such as {m['num']}{m['prefix'] or ''}B "
                                            f"or {m['num']}{m['prefix'] or ''}iB: {text} would be "
                                            f"bits ({format_size(num / BITS_PER_BYTE)})")
        num /= BITS_PER_BYTE
    return _checked(num, field, value, "a size", expected, positive)


def parse_bandwidth(value: str | float | int, *, field: str = "bandwidth") -> float:
    """One-direction bytes/s from ``"200Gbps"``, ``"25 GB/s"``, ``"600GB/s duplex"`` or ``"200Mbit"``.

    A duplex (both directions summed) figure must say so and is halved.
    """
    expected = "a bandwidth such as 200Gbps, 25GB/s or '600GB/s duplex' (b = bit, B = byte)"
    text = _text_of(value, field, expected)
    if _is_zero(text):
        return 0.0
    m = _BW_RE.match(text)
    if not m:
        hint = " (a bare number is ambiguous: add a unit)" if _is_number(text) else ""
        raise ConfigError(field, value, expected + hint)
    prefix = m["prefix"] or ""
    num = float(m["num"]) * _scale(prefix if prefix in _BINARY else prefix.upper().replace("K", "k"))
    unit = m["unit"]
    if unit in ("bps", "b/s", "bit/s", "bits/s", "bit"):
        num /= BITS_PER_BYTE
    label = (m["label"] or "").lower()
    if label in ("duplex", "bidirectional", "bi-directional", "bidir"):
        num /= 2
    return _checked(num, field, value, "a bandwidth", expected)


def parse_time(value: str | float | int, *, field: str = "time", positive: bool = False) -> float:
    """Seconds from ``"2us"``, ``"1.5 ms"``, ``"0.42s"``, ``"1 week"``; a bare ``0`` is zero."""
    expected = "a time with a unit, such as 2us, 1.5ms, 0.4s or 1week"
    text = _text_of(value, field, expected)
    if _is_zero(text):
        return _checked(0.0, field, value, "a time", expected, positive)
    m = _TIME_RE.match(text)
    if not m or m["unit"] not in _TIME_UNITS:
        hint = " (a bare number is ambiguous: add a unit)" if _is_number(text) else ""
        raise ConfigError(field, value, expected + hint)
    num = float(m["num"]) * _TIME_UNITS[m["unit"]]
    return _checked(num, field, value, "a time", expected, positive)


def parse_flop_rate(value: str | float | int, *, field: str = "flop_rate") -> float:
    """FLOP/s from ``"312TFLOPS"``, ``"989 TFLOP/s"``, ``"1.2e15"``."""
    expected = "a FLOP rate such as 312TFLOPS, 989 TFLOP/s or 1.2e15"
    text = _text_of(value, field, expected)
    m = _RATE_RE.match(text)
    if not m or m["prefix"] in _BINARY:
        raise ConfigError(field, value, expected)
    num = float(m["num"]) * _DECIMAL[m["prefix"] or ""]
    return _checked(num, field, value, "a FLOP rate", expected)


def parse_count(value: str | float | int, *, field: str = "count", positive: bool = False) -> float:
    """A plain count from ``"2e9"``, ``"175B"`` (billion), ``"7M"``, ``"1.5T"``."""
    expected = "a count such as 2e9, 175B (billion), 7M or 1.5T"
    text = _text_of(value, field, expected)
    m = _COUNT_RE.match(text)
    if not m:
        raise ConfigError(field, value, expected)
    num = float(m["num"]) * _COUNT_SUFFIX[m["suffix"]]
    return _checked(num, field, value, "a count", expected, positive)


def parse_ports(value: str, *, field: str = "ports") -> tuple[int, float]:
    """``"8x400Gbps"`` -> (8, 50e9): a port count and each port's one-direction bytes/s.

    A plain bandwidth (``"200Gbps"``) is one port.
    """
    text = str(value).strip()
    m = _PORTS_RE.match(text)
    if not m:
        return 1, parse_bandwidth(text, field=field)
    count = int(m["count"])
    if count < 1:
        raise ConfigError(field, value, "a port count >= 1, as in 8x400Gbps")
    return count, parse_bandwidth(m["rest"], field=field)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _is_zero(text: str) -> bool:
    return _is_number(text) and float(text) == 0.0


# ---------------------------------------------------------------------------- formatting


def _engineering(value: float, prefixes: list[tuple[float, str]], unit: str, digits: int) -> str:
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    magnitude = abs(value)
    for scale, prefix in prefixes:
        if magnitude >= scale * 0.9995:
            return f"{_sig(value / scale, digits)} {prefix}{unit}"
    scale, prefix = prefixes[-1]
    return f"{_sig(value / scale, digits)} {prefix}{unit}"


def _sig(x: float, digits: int) -> str:
    """``x`` with ``digits`` significant figures, without scientific notation for ordinary sizes
    (past a million of the largest unit or below a thousandth of the smallest, e.g. a step of
    1e27 days, it is the honest form)."""
    if x == 0:
        return "0"
    if abs(x) >= 1e6 or abs(x) < 1e-3:
        return f"{x:.{digits - 1}e}"
    decimals = max(0, digits - 1 - int(math.floor(math.log10(abs(x)))))
    return f"{x:.{decimals}f}"


_DEC_PREFIXES = [(1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, "")]
_BIN_PREFIXES = [(2.0**50, "Pi"), (2.0**40, "Ti"), (2.0**30, "Gi"), (2.0**20, "Mi"), (2.0**10, "Ki"), (1.0, "")]


def format_size(num_bytes: float, *, binary: bool = False, digits: int = 3) -> str:
    """``1.4e9`` -> ``"1.40 GB"``; with ``binary=True``, ``85899345920`` -> ``"80.0 GiB"``."""
    return _engineering(num_bytes, _BIN_PREFIXES if binary else _DEC_PREFIXES, "B", digits)


def format_bandwidth(bytes_per_s: float, *, bits: bool = False, digits: int = 3) -> str:
    """``25e9`` -> ``"25.0 GB/s"``; with ``bits=True`` -> ``"200 Gb/s"``. Always one direction."""
    if bits:
        return _engineering(bytes_per_s * BITS_PER_BYTE, _DEC_PREFIXES, "b/s", digits)
    return _engineering(bytes_per_s, _DEC_PREFIXES, "B/s", digits)


def format_time(seconds: float, *, digits: int = 3) -> str:
    """``0.0175`` -> ``"17.5 ms"``; ``7200`` -> ``"2.00 h"``."""
    if seconds == 0 or not math.isfinite(seconds):
        return f"{seconds:g} s"
    magnitude = abs(seconds)
    for limit, scale, unit in (
        (86400 * 2, 86400.0, "days"), (3600 * 2, 3600.0, "h"), (120, 60.0, "min"),
        (1, 1.0, "s"), (1e-3, 1e-3, "ms"), (1e-6, 1e-6, "us"),
    ):
        if magnitude >= limit * 0.9995:
            return f"{_sig(seconds / scale, digits)} {unit}"
    if magnitude >= 1e-9 * 0.9995:
        return f"{_sig(seconds / 1e-9, digits)} ns"
    return f"{seconds:.{digits - 1}e} s"


def format_flops(flops: float, *, digits: int = 3) -> str:
    """``65.536e12`` -> ``"65.5 TFLOP"``."""
    return _engineering(flops, _DEC_PREFIXES, "FLOP", digits)


def format_flop_rate(flop_per_s: float, *, digits: int = 3) -> str:
    """``156e12`` -> ``"156 TFLOP/s"``."""
    return _engineering(flop_per_s, _DEC_PREFIXES, "FLOP/s", digits)


def format_count(count: float, *, digits: int = 3) -> str:
    """``774030080`` -> ``"774 M"``; ``2e9`` -> ``"2.00 B"`` (billion)."""
    prefixes = [(1e12, "T"), (1e9, "B"), (1e6, "M"), (1e3, "k"), (1.0, "")]
    return _engineering(count, prefixes, "", digits).rstrip()
