"""The package layering, as data, and the test that holds the code to it.

Every package of ``src/willitscale`` sits in one layer; a module may import modules of its own
package and of packages in *lower* layers, never higher ones, and two packages of one layer only
where :data:`SIDEWAYS` allows it. Function-local imports count like top-level ones: a local
import that hid a cycle would be a cycle here. Within a package, modules import each other
without cycles. docs/architecture.md describes the same layers, one line per package.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx
import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "willitscale"
DOCS = Path(__file__).resolve().parents[2] / "docs" / "architecture.md"

#: lowest first; the root module ``willitscale/__init__.py`` (the lazy public API) is outside
LAYERS: tuple[tuple[str, ...], ...] = (
    ("errors",),
    ("units",),
    ("config",),
    ("hardware", "workload", "topology"),
    ("collectives", "compute", "memory"),
    ("fabric",),
    ("scenario",),
    ("step",),
    ("estimation",),
    ("plan",),
    ("validation", "results", "sweep"),
    ("bench",),
    ("calibrate",),
    ("report",),
    ("cli",),
    ("__main__",),  # python -m willitscale
)
#: (importer, imported) pairs allowed inside one layer
SIDEWAYS: frozenset[tuple[str, str]] = frozenset()

LAYER_OF = {package: i for i, layer in enumerate(LAYERS) for package in layer}


def _module_name(path: Path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[str]:
    """Every ``willitscale`` module ``path`` imports, at any depth of the file."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("willitscale"))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if not module.startswith("willitscale"):
                continue
            found.add(module)
            for alias in node.names:  # `from willitscale.x import module`
                if _exists(f"{module}.{alias.name}"):
                    found.add(f"{module}.{alias.name}")
    return found


def _exists(module: str) -> bool:
    path = SRC.parent.joinpath(*module.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _graph() -> nx.DiGraph:
    graph = nx.DiGraph()
    for path in SRC.rglob("*.py"):
        name = _module_name(path)
        graph.add_node(name)
        for imported in _imports(path):
            if _exists(imported) and imported != name:
                graph.add_edge(name, imported)
    return graph


def _package(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


GRAPH = _graph()


def test_every_package_has_a_layer():
    packages = {_package(m) for m in GRAPH if _package(m)}
    assert packages == set(LAYER_OF), (
        f"packages without a layer: {sorted(packages - set(LAYER_OF))}; "
        f"layers naming no package: {sorted(set(LAYER_OF) - packages)}")


def test_no_upward_or_sideways_import():
    bad = []
    for importer, imported in GRAPH.edges:
        a, b = _package(importer), _package(imported)
        if a is None or b is None or a == b:
            continue
        if LAYER_OF[b] > LAYER_OF[a] or (LAYER_OF[b] == LAYER_OF[a] and (a, b) not in SIDEWAYS):
            bad.append(f"{importer} -> {imported}")
    assert not bad, "imports against the layering:\n" + "\n".join(sorted(bad))


def test_no_import_cycle():
    # package __init__ modules re-export lazily and are imported by their own modules' users;
    # leave them out so that a cycle means two real modules that need each other
    modules = GRAPH.subgraph(m for m in GRAPH if not m.endswith(tuple(f".{p}" for p in LAYER_OF))
                             and m != "willitscale")
    cycles = list(nx.simple_cycles(modules))
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c + c[:1]) for c in cycles[:20])


@pytest.mark.parametrize("package", sorted(LAYER_OF))
def test_architecture_doc_names_every_package(package):
    assert f"`{package}" in DOCS.read_text(), f"docs/architecture.md does not describe {package}"
