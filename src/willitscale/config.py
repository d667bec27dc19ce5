"""Reading TOML data (catalog entries, scenarios, calibrations) into typed values.

A :class:`Table` wraps one TOML table and hands out its keys one at a time, converted and
checked; :meth:`Table.done` then rejects any key nobody asked for (a typo in a scenario must
not be silently ignored). Every error names the file, the key, the value and what was expected.

Quantities follow the boundary convention: a key carries its unit in its name
(``memory_GiB = 80``, ``bandwidth_GBps = 25``, ``latency_us = 2``) or holds a string with a
unit that :mod:`willitscale.units` parses (``bandwidth = "200Gbps"``).
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from willitscale.errors import ConfigError

__all__ = ["Table", "load_toml", "MISSING", "FrozenMap"]

T = TypeVar("T")


class FrozenMap(Mapping):
    """A read-only mapping that pickles (``types.MappingProxyType`` does not: a scenario, a
    cluster or an estimate holding one could not cross to a process pool or be cached).

    The frozen dataclasses keep their table fields (a GPU's peak FLOP/s per dtype, a
    topology's parameters, a span's arguments) in one of these: looked up like a dict, never
    changed, equal to any mapping with the same items."""

    __slots__ = ("_data",)

    def __init__(self, data: Mapping | Iterator | tuple = ()):
        self._data = dict(data)

    def __getitem__(self, key):
        return self._data[key]

    def __iter__(self):
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __contains__(self, key) -> bool:
        return key in self._data

    def __repr__(self) -> str:
        return f"FrozenMap({self._data!r})"

    def __reduce__(self):
        return (FrozenMap, (self._data,))

    def __or__(self, other: Mapping) -> dict:
        return {**self._data, **other}

    def copy(self) -> dict:
        """A plain, changeable dict of the same items (as ``MappingProxyType.copy``)."""
        return dict(self._data)


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()


def load_toml(path: str | Path) -> dict[str, Any]:
    """Parse a TOML file; a syntax error becomes a :class:`ConfigError` naming the file."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a TOML file") from None
    except PermissionError:
        raise ConfigError(f"{path}: not readable (permission denied)") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not valid TOML (not UTF-8 text)") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None


class Table:
    """One TOML table being read; each getter consumes a key, :meth:`done` rejects leftovers."""

    def __init__(self, data: Mapping[str, Any], where: str):
        if not isinstance(data, Mapping):
            raise ConfigError(where, data, "a table (key = value pairs)")
        self._data = dict(data)
        self._used: set[str] = set()
        self.where = where

    # -- generic access ------------------------------------------------------------------

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def keys(self) -> Iterator[str]:
        return iter(self._data)

    def _field(self, key: str) -> str:
        return f"{self.where}: {key}"

    def get(self, key: str, convert: Callable[[Any], T], expected: str, default: Any = MISSING) -> T:
        """The value under ``key`` passed through ``convert``; errors name the key."""
        self._used.add(key)
        if key not in self._data:
            if default is MISSING:
                raise ConfigError(f"{self.where}: missing required key {key!r} ({expected})")
            return default
        raw = self._data[key]
        try:
            return convert(raw)
        except ConfigError as exc:
            raise ConfigError(self._field(key), raw, exc.expected or str(exc)) from None
        except (TypeError, ValueError):
            raise ConfigError(self._field(key), raw, expected) from None

    # -- typed getters -------------------------------------------------------------------

    def str(self, key: str, default: Any = MISSING, *, choices: Iterator[str] | None = None) -> str:
        choices = list(choices) if choices is not None else None
        expected = "one of " + ", ".join(choices) if choices else "a string"

        def convert(v: Any) -> str:
            if not isinstance(v, str) or (choices and v not in choices):
                raise ValueError
            return v

        return self.get(key, convert, expected, default)

    def float(self, key: str, default: Any = MISSING, *, min: float | None = None,
              max: float | None = None, positive: bool = False) -> float:
        parts = ["a number"]
        if positive:
            parts.append("> 0")
        if min is not None:
            parts.append(f">= {min:g}")
        if max is not None:
            parts.append(f"<= {max:g}")
        expected = " ".join(parts)

        def convert(v: Any) -> float:
            if isinstance(v, bool) or not isinstance(v, (int, float)):
                raise TypeError
            v = float(v)
            if v != v or (positive and v <= 0) or (min is not None and v < min) or (
                max is not None and v > max
            ):
                raise ValueError
            return v

        return self.get(key, convert, expected, default)

    def int(self, key: str, default: Any = MISSING, *, min: int | None = None) -> int:
        expected = "an integer" + (f" >= {min}" if min is not None else "")

        def convert(v: Any) -> int:
            if isinstance(v, bool) or not isinstance(v, int) or (min is not None and v < min):
                raise ValueError
            return v

        return self.get(key, convert, expected, default)

    def bool(self, key: str, default: Any = MISSING) -> bool:
        def convert(v: Any) -> bool:
            if not isinstance(v, bool):
                raise TypeError
            return v

        return self.get(key, convert, "true or false", default)

    def list(self, key: str, default: Any = MISSING) -> list[Any]:
        def convert(v: Any) -> list[Any]:
            if not isinstance(v, list):
                raise TypeError
            return v

        return self.get(key, convert, "a list", default)

    def table(self, key: str, default: Any = MISSING) -> Table:
        def convert(v: Any) -> Table:
            return Table(v, f"{self.where}.{key}")

        if default is not MISSING and key not in self._data:
            self._used.add(key)
            return default
        return self.get(key, convert, "a table")

    def tables(self, key: str) -> list[Table]:
        """An array of tables (``[[key]]``), possibly empty."""
        raw = self.list(key, [])
        return [Table(item, f"{self.where}.{key}[{i}]") for i, item in enumerate(raw)]

    def quantity(self, name: str, parse: Callable[..., float], unit_keys: Mapping[str, float],
                 default: Any = MISSING, *, positive: bool = False) -> float:
        """A quantity given either as ``name = "<string with unit>"`` or as one of
        ``unit_keys`` (``{"memory_GiB": 2**30, "memory_bytes": 1}``: the key's unit in its name).
        Exactly one of the spellings may be present. ``positive``: 0 is refused too (``parse``
        then takes ``positive=True``).
        """
        present = [k for k in (name, *unit_keys) if k in self._data]
        if len(present) > 1:
            raise ConfigError(f"{self.where}: give only one of {', '.join(present)}")
        if not present:
            self._used.update((name, *unit_keys))
            if default is MISSING:
                spellings = ", ".join((name, *unit_keys))
                raise ConfigError(f"{self.where}: missing required key (one of {spellings})")
            return default
        key = present[0]
        if key == name:
            extra = {"positive": True} if positive else {}
            return self.get(key, lambda v: parse(v, field=self._field(key), **extra), "a quantity with a unit")
        return (self.float(key, positive=True) if positive else self.float(key, min=0)) * unit_keys[key]

    # -- finish --------------------------------------------------------------------------

    def done(self) -> None:
        """Raise if the table holds a key nobody read, suggesting the closest valid key."""
        unknown = [k for k in self._data if k not in self._used]
        if not unknown:
            return
        key = unknown[0]
        close = difflib.get_close_matches(key, sorted(self._used), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; valid keys: {', '.join(sorted(self._used))}"
        raise ConfigError(f"{self.where}: unknown key {key!r}{hint}")

