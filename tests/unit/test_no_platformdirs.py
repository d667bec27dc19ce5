"""platformdirs is needed only to find the default data folder: with ``WILLITSCALE_HOME`` set,
willitscale runs where it is not installed (issue 18: the GPU machines lack it).

Each check runs in a fresh interpreter in which ``import platformdirs`` fails
(``sys.modules["platformdirs"] = None`` makes the import raise ImportError, as if it were absent).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[2] / "src"

BLOCK = "import sys; sys.modules['platformdirs'] = None\n"


def _python(code: str, env_home: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "WILLITSCALE_HOME"}
    env["PYTHONPATH"] = str(SRC)
    if env_home is not None:
        env["WILLITSCALE_HOME"] = env_home
    return subprocess.run([sys.executable, "-c", BLOCK + code], capture_output=True, text=True,
                          env=env, timeout=120, check=False)


def test_store_and_catalog_work_without_platformdirs_when_home_is_set(tmp_path):
    code = (
        "from willitscale.results.store import Store\n"
        "from willitscale.hardware.catalog import load_catalog, catalog_dir\n"
        "s = Store(); rid = s.start_run('matmul', options={}, environment={}, label='x')\n"
        "s.finish_run(rid, 'complete'); s.close()\n"
        "print(len(load_catalog().gpus) > 0, catalog_dir())\n"
        "from willitscale.cli.main import main\n"
        "raise SystemExit(main(['results', 'list']))\n")
    out = _python(code, str(tmp_path))
    assert out.returncode == 0, out.stderr
    assert f"True {tmp_path / 'catalog'}" in out.stdout
    assert (tmp_path / "results.sqlite").is_file()


def test_without_platformdirs_or_home_the_error_says_what_to_set(tmp_path):
    code = ("from willitscale.results.home import store_path\n"
            "from willitscale.errors import ConfigError\n"
            "try:\n    store_path()\nexcept ConfigError as e:\n    print('ERR', e)\n")
    out = _python(code, None)
    assert out.returncode == 0, out.stderr
    assert "ERR" in out.stdout and "WILLITSCALE_HOME" in out.stdout and "platformdirs" in out.stdout
