"""A topology described by its kind, builder parameters and link speeds: what the CLI builds,
saves (``fabric build --save``) and loads back (``fabric show``, ``--topology-file``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from willitscale.config import FrozenMap
from willitscale.errors import ConfigError, UnknownNameError
from willitscale.topology import TOPOLOGY_KINDS
from willitscale.topology.graph import Topology
from willitscale.topology.links import FabricLinks

__all__ = ["TopologySpec", "KIND_PARAMS"]

#: the parameters each builder accepts (besides ``links``)
KIND_PARAMS: dict[str, tuple[str, ...]] = {
    "nvswitch": ("gpus_per_node",),
    "rail-optimized": ("nodes", "gpus_per_node", "radix", "oversubscription", "spines"),
    "rail-only": ("nodes", "gpus_per_node", "radix"),
    "fat-tree": ("k", "tiers", "gpus_per_node", "nodes", "oversubscription", "top_oversubscription"),
    "dragonfly": ("groups", "routers_per_group", "global_links", "nodes_per_router", "gpus_per_node"),
    "torus": ("dims", "gpus_per_node"),
}

#: the parameters a kind cannot do without, with an example of each (as the CLI flag)
REQUIRED_PARAMS: dict[str, tuple[tuple[str, str], ...]] = {
    "fat-tree": (("k", "an even switch radix, e.g. --k 16"),),
    "torus": (("dims", "the torus size, e.g. --dims 4x4x4"),),
    "dragonfly": (("groups", "e.g. --groups 9"), ("routers_per_group", "e.g. --routers-per-group 4"),
                  ("global_links", "e.g. --global-links 2; balanced when groups = routers x links + 1")),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class TopologySpec:
    """``kind`` + builder ``params`` + ``links``; :meth:`build` makes the :class:`Topology`."""

    kind: str
    params: Mapping[str, Any] = field(default_factory=dict)
    links: FabricLinks = field(default_factory=FabricLinks)

    def __post_init__(self) -> None:
        kind = str(self.kind).strip().lower().replace("_", "-")
        if kind not in KIND_PARAMS:
            raise UnknownNameError("topology", self.kind, KIND_PARAMS)
        object.__setattr__(self, "kind", kind)
        extra = set(self.params) - set(KIND_PARAMS[kind])
        if extra:
            raise ConfigError(f"{kind} topology: option(s) {', '.join(sorted(extra))} do not apply; "
                              f"it takes {', '.join(KIND_PARAMS[kind])}")
        object.__setattr__(self, "params", FrozenMap(dict(self.params)))

    def build(self) -> Topology:
        params = dict(self.params)
        missing = [(name, what) for name, what in REQUIRED_PARAMS.get(self.kind, ()) if params.get(name) is None]
        if missing:
            raise ConfigError(f"{self.kind} needs " + "; ".join(
                f"--{name.replace('_', '-')} ({what})" for name, what in missing))
        if "dims" in params:
            params["dims"] = tuple(params["dims"])
        return TOPOLOGY_KINDS[self.kind](links=self.links, **params)

    def to_json(self) -> dict:
        return {"kind": self.kind, "params": dict(self.params), "links": asdict(self.links)}

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str = "topology") -> TopologySpec:
        if not isinstance(data, Mapping) or "kind" not in data:
            raise ConfigError(where, "…", "a JSON object with kind, params and links (from fabric build --save)")
        try:
            links = FabricLinks(**dict(data.get("links", {})))
        except TypeError as exc:
            raise ConfigError(f"{where}: links: {exc}") from None
        return cls(kind=data["kind"], params=dict(data.get("params", {})), links=links)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_json(), indent=2) + "\n")

    @classmethod
    def load(cls, path: str | Path) -> TopologySpec:
        p = Path(path)
        try:
            data = json.loads(p.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{p}: no such file") from None
        except IsADirectoryError:
            raise ConfigError(f"{p}: is a directory, not a topology spec (JSON from fabric build --save)") from None
        except UnicodeDecodeError:
            raise ConfigError(f"{p}: not valid JSON (not UTF-8 text)") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{p}: not valid JSON: {exc}") from None
        return cls.from_json(data, where=str(p))
