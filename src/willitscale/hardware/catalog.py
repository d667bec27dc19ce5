"""The hardware catalog: GPUs, links, NVSwitch chips and node presets, loaded from TOML.

Three layers, later ones overriding earlier entries of the same name:

1. the built-in files in ``willitscale/hardware/catalog/*.toml``;
2. the user's ``$WILLITSCALE_HOME/catalog/*.toml`` (else the platform's user data folder,
   ``platformdirs.user_data_dir("willitscale")``), read in name order;
3. files passed explicitly (``load_catalog("my_cluster.toml")``, ``--catalog FILE``).

Within one layer a name may be defined once; an entry overriding an earlier layer's keeps its
aliases unless it lists its own. Names are case-insensitive, ``_`` and spaces read
as ``-``, and each entry may list ``aliases``; a name or alias means one entry across all kinds,
so ``willitscale hardware show NAME`` is never ambiguous. Loading is pure and cached: the same
files (same path, size and modification time) give the same :class:`Catalog` object.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from willitscale.config import FrozenMap, Table, load_toml
from willitscale.errors import ConfigError, UnknownNameError
from willitscale.hardware.loader import (
    LinkDefaults,
    read_defaults,
    read_gpu,
    read_link,
    read_node,
    read_switch,
)
from willitscale.hardware.model import Gpu, Link, LinkKind, Node, Switch

__all__ = ["Catalog", "load_catalog", "catalog_dir", "normalize_name", "KINDS", "get_gpu", "get_link",
           "get_node", "get_switch", "list_gpus", "list_links", "list_nodes", "list_switches"]

HOME_ENV = "WILLITSCALE_HOME"
#: entry kinds, in the order they are built (each may refer only to earlier kinds)
KINDS = ("link", "switch", "gpu", "node")
_SECTIONS = ("defaults", *KINDS)
Entry = Gpu | Link | Switch | Node


def normalize_name(name: str) -> str:
    """The lookup form of a catalog name: ``"H100_SXM"`` -> ``"h100-sxm"``."""
    return "-".join(str(name).strip().lower().replace("_", " ").split())


def catalog_dir() -> Path:
    """Where user catalog files live: ``$WILLITSCALE_HOME/catalog`` or the user data folder's."""
    home = os.environ.get(HOME_ENV)
    if home:
        return Path(home).expanduser() / "catalog"
    try:
        import platformdirs
    except ImportError:
        raise ConfigError(HOME_ENV, "unset", "a folder for willitscale's data (the default folder "
                          "comes from platformdirs, which is not installed: set WILLITSCALE_HOME "
                          "or pip install platformdirs)") from None
    return Path(platformdirs.user_data_dir("willitscale")) / "catalog"


@dataclass(frozen=True, slots=True)
class Catalog:
    """Every known GPU, link, switch and node, looked up by name or alias (case-insensitive)."""

    gpus: Mapping[str, Gpu]
    links: Mapping[str, Link]
    switches: Mapping[str, Switch]
    nodes: Mapping[str, Node]
    defaults: Mapping[LinkKind, LinkDefaults]
    aliases: Mapping[str, tuple[str, str]]  #: normalized name or alias -> (kind, name)
    origins: Mapping[str, str]  #: entry name -> the file that defined it

    def _get(self, kind: str, name: str) -> Any:
        found = self.aliases.get(normalize_name(name))
        if found is None or found[0] != kind:
            raise UnknownNameError(kind if kind != "switch" else "NVSwitch", name, self.names(kind))
        return self._table(kind)[found[1]]

    def _table(self, kind: str) -> Mapping[str, Any]:
        return {"gpu": self.gpus, "link": self.links, "switch": self.switches, "node": self.nodes}[kind]

    def __repr__(self) -> str:
        files = sorted(set(self.origins.values()))
        return (f"Catalog({len(self.gpus)} GPUs, {len(self.links)} links, {len(self.switches)} "
                f"switches, {len(self.nodes)} nodes from {len(files)} file(s))")

    def names(self, kind: str) -> list[str]:
        """Canonical names and aliases of one kind (for suggestions)."""
        return sorted(alias for alias, (k, _) in self.aliases.items() if k == kind)

    def gpu(self, name: str) -> Gpu:
        """The GPU called ``name`` (or one of its aliases)."""
        return self._get("gpu", name)

    def link(self, name: str) -> Link:
        """The link called ``name`` (``nvlink4``, ``pcie5``, ``ib-ndr``, ``roce-400g``, ...)."""
        return self._get("link", name)

    def switch(self, name: str) -> Switch:
        """The NVSwitch generation called ``name`` (``nvswitch-v3``)."""
        return self._get("switch", name)

    def node(self, name: str) -> Node:
        """The node preset called ``name`` (``dgx-h100``, ``p5``, ``baskerville``, ...)."""
        return self._get("node", name)

    def find(self, name: str) -> tuple[str, Entry]:
        """``(kind, entry)`` for a name of any kind."""
        found = self.aliases.get(normalize_name(name))
        if found is None:
            raise UnknownNameError("catalog entry", name, self.aliases)
        return found[0], self._table(found[0])[found[1]]

    def aliases_of(self, name: str) -> list[str]:
        """The other names an entry answers to."""
        return sorted(a for a, (_, n) in self.aliases.items() if n == name and a != name)

    def link_defaults(self, kind: LinkKind | str) -> LinkDefaults:
        """Latency and efficiency assumed for links of ``kind`` that give none."""
        return self.defaults[LinkKind(kind)]


# ---------------------------------------------------------------------------- loading


def _builtin_files() -> list[Path]:
    folder = resources.files("willitscale.hardware") / "catalog"
    return sorted(Path(str(p)) for p in folder.iterdir() if p.name.endswith(".toml"))


def _file_key(path: Path) -> tuple[str, int, int]:
    try:
        stat = path.stat()
    except OSError:
        raise ConfigError(f"{path}: no such catalog file") from None
    return str(path), stat.st_mtime_ns, stat.st_size


@functools.cache
def _sections(key: tuple[str, int, int]) -> Mapping[str, Mapping[str, Any]]:
    """One file's entries by section, checked for unknown sections (cached per file version)."""
    path = key[0]
    root = Table(load_toml(path), path)
    sections = {section: root.get(section, _entries(path, section), "a table of named tables", {})
                for section in _SECTIONS}
    root.done()
    return FrozenMap(sections)


def _entries(path: str, section: str):
    def convert(value: Any) -> Mapping[str, Any]:
        if not isinstance(value, Mapping) or not all(isinstance(v, Mapping) for v in value.values()):
            raise ValueError
        return FrozenMap(dict(value))

    return convert


def _layered(layers: Iterable[tuple[str, ...]]) -> dict[str, dict[str, tuple[str, Mapping]]]:
    """section -> name -> (file, table); later layers override, duplicates within a layer fail."""
    merged: dict[str, dict[str, tuple[str, Mapping]]] = {s: {} for s in _SECTIONS}
    for layer in layers:
        seen: dict[tuple[str, str], str] = {}
        for file_key in layer:
            for section, entries in _sections(file_key).items():
                for raw_name, table in entries.items():
                    name = normalize_name(raw_name) if section != "defaults" else raw_name
                    if (section, name) in seen:
                        raise ConfigError(f"{section} {name!r} is defined twice: in {seen[section, name]} "
                                          f"and in {file_key[0]}")
                    seen[section, name] = file_key[0]
                    earlier = merged[section].get(name)
                    if earlier is not None and "aliases" not in table and "aliases" in earlier[1]:
                        # an override keeps the names users know the entry by (h100 for h100-sxm)
                        table = {**table, "aliases": earlier[1]["aliases"]}
                    merged[section][name] = (file_key[0], table)
    return merged


class _Builder:
    """Turns merged raw tables into objects, kind by kind, resolving names and aliases."""

    def __init__(self, raw: dict[str, dict[str, tuple[str, Mapping]]]):
        self.raw = raw
        self.built: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
        self.aliases: dict[str, tuple[str, str]] = {}

    def where(self, section: str, name: str) -> str:
        return f"{self.raw[section][name][0]}: [{section}.{name}]"

    def table(self, section: str, name: str) -> Table:
        return Table(self.raw[section][name][1], self.where(section, name))

    def add_aliases(self) -> None:
        for kind in KINDS:
            for name, (_, data) in self.raw[kind].items():
                aliases = data.get("aliases", [])
                if not isinstance(aliases, list) or not all(isinstance(a, str) for a in aliases):
                    raise ConfigError(f"{self.where(kind, name)}: aliases", aliases, "a list of names")
                for alias in [name, *map(normalize_name, aliases)]:
                    other = self.aliases.get(alias)
                    if other is not None and other != (kind, name):
                        raise ConfigError(f"name {alias!r} means both {other[0]} {other[1]!r} and "
                                          f"{kind} {name!r} ({self.where(kind, name)})")
                    self.aliases[alias] = (kind, name)

    def defaults_for(self, defaults: Mapping[LinkKind, LinkDefaults], section: str,
                     name: str) -> LinkDefaults | None:
        kind = self.raw[section][name][1].get("kind")
        valid = {k.value for k in LinkKind}
        return defaults.get(LinkKind(kind)) if kind in valid else None

    def resolve(self, kind: str, name: str) -> Any:
        found = self.aliases.get(normalize_name(name))
        if found is None or found[0] != kind:
            known = sorted(a for a, (k, _) in self.aliases.items() if k == kind)
            raise UnknownNameError(kind, name, known)
        return self.built[kind][found[1]]

    def build(self) -> Catalog:
        defaults = {}
        for kind in self.raw["defaults"]:
            d = read_defaults(kind, self.table("defaults", kind))
            defaults[d.kind] = d
        self.add_aliases()
        readers = {
            "link": lambda n, t: read_link(n, t, self.defaults_for(defaults, "link", n)),
            "switch": lambda n, t: read_switch(n, t, self.resolve),
            "gpu": lambda n, t: read_gpu(n, t, self.resolve),
            "node": lambda n, t: read_node(n, t, self.resolve),
        }
        for kind in KINDS:
            for name in self.raw[kind]:
                t = self.table(kind, name)
                t.list("aliases", [])
                self.built[kind][name] = readers[kind](name, t)
        origins = {name: self.raw[k][name][0] for k in KINDS for name in self.raw[k]}
        return Catalog(
            gpus=FrozenMap(self.built["gpu"]), links=FrozenMap(self.built["link"]),
            switches=FrozenMap(self.built["switch"]), nodes=FrozenMap(self.built["node"]),
            defaults=FrozenMap(defaults), aliases=FrozenMap(dict(sorted(self.aliases.items()))),
            origins=FrozenMap(origins),
        )


@functools.cache
def _build(layers: tuple[tuple[tuple[str, int, int], ...], ...]) -> Catalog:
    return _Builder(_layered(layers)).build()


def load_catalog(*paths: str | os.PathLike[str], home: bool = True) -> Catalog:
    """The catalog: built-in entries, then ``$WILLITSCALE_HOME/catalog/*.toml`` (unless
    ``home=False``), then ``paths`` in order. Cached on the files' paths, sizes and mtimes."""
    layers = [tuple(_file_key(p) for p in _builtin_files())]
    if home:
        folder = catalog_dir()
        if folder.is_dir():
            layers.append(tuple(_file_key(p) for p in sorted(folder.glob("*.toml"))))
    if paths:
        layers.append(tuple(_file_key(Path(p)) for p in paths))
    return _build(tuple(layers))


# ---------------------------------------------------------------------------- shortcuts


def get_gpu(name: str) -> Gpu:
    """The catalog GPU called ``name`` (case-insensitive, aliases allowed: ``h100`` -> ``h100-sxm``)."""
    return load_catalog().gpu(name)


def get_link(name: str) -> Link:
    """The catalog link called ``name`` (``nvlink4``, ``pcie5``, ``ib-ndr``, ``roce-400g``, ``efa-v2``)."""
    return load_catalog().link(name)


def get_node(name: str) -> Node:
    """The catalog node preset called ``name`` (``dgx-h100``, ``p5``, ``baskerville``, ...)."""
    return load_catalog().node(name)


def get_switch(name: str) -> Switch:
    """The catalog NVSwitch generation called ``name`` (``nvswitch-v3``)."""
    return load_catalog().switch(name)


def list_gpus() -> tuple[Gpu, ...]:
    """Every catalog GPU, in catalog order."""
    return tuple(load_catalog().gpus.values())


def list_links() -> tuple[Link, ...]:
    """Every catalog link (GPU links and NIC ports), in catalog order."""
    return tuple(load_catalog().links.values())


def list_nodes() -> tuple[Node, ...]:
    """Every catalog node preset, in catalog order."""
    return tuple(load_catalog().nodes.values())


def list_switches() -> tuple[Switch, ...]:
    """Every catalog NVSwitch generation."""
    return tuple(load_catalog().switches.values())
