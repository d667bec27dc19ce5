"""YAML job files (Megatron-LM's ``--yaml-cfg``, NeMo 1.x Hydra configs): read, and values looked
up by key path with the references between keys that Hydra configs use resolved.

pyyaml's safe loader reads the file (no Python objects built from it); a syntax error is a
:class:`~willitscale.errors.ConfigError` naming ``FILE:LINE``. NeMo's configs point keys at
other keys with OmegaConf interpolations: ``${model.encoder_seq_length}`` (from the root) and
``${.encoder_seq_length}`` (a sibling; each further leading dot goes one level up). Those are
followed; resolvers (``${multiply:...}``) and environment lookups are not evaluated, and a key
read through one is an error naming it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from willitscale.errors import ConfigError

__all__ = ["load_yaml", "value_at", "integer_at"]

_REFERENCE = re.compile(r"^\$\{(\.*)([A-Za-z_][A-Za-z0-9_.]*)\}$")


def load_yaml(path: str | Path) -> dict[str, Any]:
    """The top-level mapping of the YAML file at ``path``."""
    import yaml

    path = Path(path)
    try:
        text = path.read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot be read ({exc.strerror or exc})") from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark is not None else str(path)
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict):
        raise ConfigError(str(path), type(data).__name__, "a YAML mapping of keys at the top")
    return data


def _lookup(data: Mapping, path: tuple[str, ...]) -> Any:
    node: Any = data
    for key in path:
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node


def value_at(data: Mapping, key: str, file: str) -> Any:
    """The value at dotted ``key`` (``model.optim.name``), None when absent, references followed."""
    path = tuple(key.split("."))
    first = _lookup(data, path)
    for _ in range(32):
        value = _lookup(data, path)
        if not (isinstance(value, str) and value.startswith("${")):
            return value
        match = _REFERENCE.match(value.strip())
        if match is None:
            raise ConfigError(f"{file}: {key}", value, "a value, or ${other.key}: resolvers and "
                              "environment variables are not evaluated here (put the value)")
        dots, target = match.groups()
        up = len(dots)
        path = (path[:-up] if up else ()) + tuple(target.split("."))
    raise ConfigError(f"{file}: {key}", first, "references that end (these go round in a cycle)")


def integer_at(data: Mapping, key: str, file: str, default: int | None = None) -> int | None:
    """The integer at ``key``; ``default`` when absent or null; ConfigError for anything else."""
    value = value_at(data, key, file)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise ConfigError(f"{file}: {key}", value, "an integer")
    return value
