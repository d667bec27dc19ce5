"""Type checkers see the lazy public API: ``py.typed`` and the ``__init__.pyi`` stub.

``willitscale/__init__.py`` loads names on first use through a module ``__getattr__``, which a
type checker reads as "every attribute is Any": without the stub, ``wis.Plan(dp="four")`` and a
misspelt ``wis.estimat`` both pass mypy (checked when the stub was written: "Success: no issues
found"). The stub imports each public name from the module ``_EXPORTS`` names.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

import willitscale

PACKAGE = Path(willitscale.__file__).parent
STUB = PACKAGE / "__init__.pyi"


def _stub_exports() -> dict[str, str]:
    found = {}
    for node in ast.parse(STUB.read_text()).body:
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                assert alias.asname == alias.name, f"{alias.name}: re-export needs 'as {alias.name}'"
                found[alias.name] = node.module
    return found


def test_package_is_marked_typed():
    assert (PACKAGE / "py.typed").is_file()


def test_stub_names_every_public_name_from_its_module():
    assert _stub_exports() == willitscale._EXPORTS


def test_stub_has_no_module_getattr():
    # a stub __getattr__ would make every misspelt name Any again
    names = {n.name for n in ast.parse(STUB.read_text()).body if isinstance(n, ast.FunctionDef)}
    assert "__getattr__" not in names


@pytest.mark.slow
def test_mypy_reports_wrong_types_and_unknown_names_through_the_stub(tmp_path):
    pytest.importorskip("mypy")
    (tmp_path / "good.py").write_text(
        "import willitscale as wis\n"
        "memory: float = wis.get_gpu('h100').memory\n"
        "n: int = wis.Plan(dp=4, tp=2).gpus\n")
    (tmp_path / "bad.py").write_text(
        "import willitscale as wis\n"
        "plan = wis.Plan(dp='four')\n"
        "x = wis.estimat\n")
    run = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental",
                          "good.py", "bad.py"], cwd=tmp_path, capture_output=True, text=True,
                         timeout=300)
    errors = [line for line in run.stdout.splitlines() if ": error:" in line]
    assert len(errors) == 2, run.stdout
    assert errors[0].startswith("bad.py:2:") and '"dp" to "Plan"' in errors[0]
    assert errors[1].startswith("bad.py:3:") and '"estimat"' in errors[1]


def test_license_is_an_spdx_expression_with_its_text_shipped():
    # PEP 639: `license` is an SPDX expression, `license-files` the texts the wheel carries
    # (a wheel built from this tree has "License-Expression: Apache-2.0" and
    # dist-info/licenses/LICENSE: checked by hand with `pip wheel --no-deps .`).
    import tomllib

    root = PACKAGE.parents[1]
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    text = (root / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text  # the whole text, not a pointer to it
