"""A sweep's grid: a TOML file of scenarios, expanded into the points the sweep runs.

::

    kind = "fabric"          # fabric (flow simulations) or estimate (step-time estimates)
    seeds = "1-10"           # fabric only: every point once per routing seed (default: seed 0)

    [fixed]                  # settings every point shares
    topology = "fat-tree"
    k = 16
    traffic = "step"
    tp = 8
    pp = 2
    dp = 64
    dp_bytes = "1GB"

    [grid]                   # each key a list: the points are every combination
    oversubscription = [1, 2, 4]
    routing = ["ecmp", "spray"]

    [[points]]               # optional: listed scenarios (each over [fixed]; with [grid], each
    nodes = 128              # listed point is combined with every grid combination)

A point is its settings (as written, so the output's columns read like the file) and its seed;
its ``key`` (a hash of both) is what a resumed sweep skips. Every value is checked when the file
is read, and an error names where it is: ``grid.routing[2] = 'spry' is not valid: ...``.
Combinations that cannot run (degrees that do not multiply to the GPUs, a plan out of memory)
are found when the point runs and recorded in its row's ``error`` column.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from willitscale.config import load_toml
from willitscale.errors import ConfigError
from willitscale.sweep.points import KINDS

__all__ = ["Grid", "Point", "load_grid", "parse_grid", "parse_seeds"]

#: the top-level keys of a grid file
TOP_KEYS = ("kind", "seeds", "fixed", "grid", "points")

#: most points one grid may expand to (a typo such as a 10,000-value list times another)
MAX_POINTS = 10_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One scenario of a sweep: ``settings`` as the grid file wrote them, and a routing ``seed``."""

    settings: Mapping[str, Any]
    seed: int | None = None
    #: the grid file's folder: relative file paths in the settings (an estimate's ``model``
    #: config, ``calibration``) are read from there, as a scenario file's are; not part of the key
    base: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "settings", MappingProxyType(dict(self.settings)))

    @property
    def key(self) -> str:
        """16 hex digits identifying the point (its settings and seed), stable across runs."""
        text = json.dumps({"settings": dict(self.settings), "seed": self.seed}, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def __reduce__(self):  # MappingProxyType does not pickle: send a plain dict to workers
        return (_point, (dict(self.settings), self.seed, self.base))


def _point(settings: dict, seed: int | None, base: str | None = None) -> Point:
    return Point(settings=settings, seed=seed, base=base)


@dataclass(frozen=True, slots=True, kw_only=True)
class Grid:
    """The points of a sweep of one ``kind`` (``fabric`` or ``estimate``), in grid order."""

    kind: str
    points: tuple[Point, ...]

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ConfigError("kind", self.kind, " or ".join(KINDS))
        keys = [p.key for p in self.points]
        if len(set(keys)) != len(keys):
            raise ConfigError("the grid lists the same point twice (same settings and seed)")

    @property
    def setting_names(self) -> tuple[str, ...]:
        """Every setting any point gives, sorted: the output's parameter columns."""
        return tuple(sorted({name for p in self.points for name in p.settings}))


def parse_seeds(text: Any, *, field: str = "seeds") -> tuple[int, ...]:
    """``"1-10"``, ``"1,4,7"``, ``[1, 4, 7]`` or ``3`` as a tuple of distinct seeds, in order."""
    expected = "seeds such as 1-10, 1,4,7 or a list of integers >= 0"
    if isinstance(text, bool):
        raise ConfigError(field, text, expected)
    parts = [str(x) for x in text] if isinstance(text, list) else str(text).split(",")
    out: list[int] = []
    try:
        for part in (p.strip() for p in parts):
            if "-" in part[1:]:
                a, b = part.split("-", 1)
                lo, hi = int(a), int(b)
                if hi < lo or hi - lo >= MAX_POINTS:
                    raise ValueError
                out += range(lo, hi + 1)
            else:
                out.append(int(part))
    except ValueError:
        raise ConfigError(field, text, expected) from None
    if not out or min(out) < 0 or len(set(out)) != len(out):
        raise ConfigError(field, text, expected + ", each once")
    return tuple(out)


def _table(data: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    value = data.get(name, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"{where}{name}", value, "a table of settings")
    return dict(value)


def _checked(kind: str, settings: Mapping[str, Any], where: str) -> dict[str, Any]:
    """``settings`` with every key known to ``kind`` and every value valid (errors name ``where``)."""
    check = KINDS[kind].check
    for name, value in settings.items():
        check(name, value, field=f"{where}.{name}")
    return dict(settings)


def _grid_lists(data: Mapping[str, Any], kind: str) -> list[tuple[str, list]]:
    out = []
    for name, values in _table(data, "grid", "").items():
        if not isinstance(values, list) or not values:
            raise ConfigError(f"grid.{name}", values, "a non-empty list of values, e.g. [1, 2, 4]")
        for i, value in enumerate(values):
            KINDS[kind].check(name, value, field=f"grid.{name}[{i}]")
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            raise ConfigError(f"grid.{name}", values, "each value once")
        out.append((name, values))
    return out


def _listed(data: Mapping[str, Any], kind: str) -> list[dict[str, Any]]:
    listed = data.get("points", [{}])
    if not isinstance(listed, list) or not listed:
        raise ConfigError("points", listed, "a list of tables ([[points]] entries)")
    out = []
    for i, entry in enumerate(listed):
        if not isinstance(entry, Mapping):
            raise ConfigError(f"points[{i}]", entry, "a table of settings")
        out.append(_checked(kind, entry, f"points[{i}]"))
    return out


def parse_grid(data: Mapping[str, Any], *, seeds: Sequence[int] | None = None,
               base: str | Path | None = None) -> Grid:
    """The :class:`Grid` a parsed grid file describes; ``seeds`` (``--seeds``) overrides the file's;
    ``base``: the folder relative file paths in the settings are read from (the grid file's)."""
    unknown = sorted(set(data) - set(TOP_KEYS))
    if unknown:
        raise ConfigError(unknown[0], data[unknown[0]], "a top-level key of a grid file: " + ", ".join(TOP_KEYS))
    kind = data.get("kind")
    if kind not in KINDS:
        raise ConfigError("kind", kind, " or ".join(f"{k!r}" for k in KINDS))
    if seeds is None and "seeds" in data:
        seeds = parse_seeds(data["seeds"])
    if seeds is not None and not KINDS[kind].seeded:
        raise ConfigError("seeds", ",".join(map(str, seeds)),
                          f"no seeds for kind = {kind!r} (vary routing_seed in [grid] with network = 'flow')")
    fixed = _checked(kind, _table(data, "fixed", ""), "fixed")
    lists = _grid_lists(data, kind)
    listed = _listed(data, kind)
    total = len(listed) * len(seeds or (None,))
    for _, values in lists:
        total *= len(values)
    if total > MAX_POINTS:
        raise ConfigError("grid", f"{total:,} points", f"at most {MAX_POINTS:,} points in one sweep")
    names = [name for name, _ in lists]
    points = []
    for entry in listed:
        for combo in itertools.product(*(values for _, values in lists)):
            settings = {**fixed, **entry, **dict(zip(names, combo))}
            points += [Point(settings=settings, seed=s, base=None if base is None else str(base))
                       for s in (seeds or (None,))]
    return Grid(kind=kind, points=tuple(points))


def load_grid(path: str | Path, *, seeds: Sequence[int] | None = None) -> Grid:
    """:func:`parse_grid` of the TOML file at ``path`` (errors name the file)."""
    data = load_toml(path)
    try:
        return parse_grid(data, seeds=seeds, base=Path(path).resolve().parent)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None
