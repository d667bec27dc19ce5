"""The torchrun and Slurm examples: the single-node one runs here on CPU ranks; the others are
checked for syntax (they need a cluster)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

pytestmark = pytest.mark.distributed


@pytest.mark.parametrize("script", ["torchrun/single_node.sh", "torchrun/multi_node.sh",
                                    "slurm/bench.sbatch"])
def test_scripts_parse(script):
    subprocess.run(["bash", "-n", str(EXAMPLES / script)], check=True)


def test_torchrun_single_node_on_two_cpu_ranks(tmp_path, terminal):
    bindir = Path(sys.executable).parent
    if shutil.which("torchrun", path=str(bindir)) is None:
        pytest.skip("torchrun is not installed next to this Python")
    env = {**os.environ, "NPROC": "2", "WILLITSCALE_HOME": str(tmp_path),
           "PATH": f"{bindir}{os.pathsep}{os.environ['PATH']}"}
    # its own process group: if it hangs, the timeout ends torchrun and its ranks too, not
    # only the shell (~4 s unloaded: starting torchrun and two ranks that import torch)
    proc = terminal(["bash", str(EXAMPLES / "torchrun/single_node.sh"), "-b", "1kB", "-e", "8kB",
                     "-n", "2", "-w", "1", "--json"], env=env, stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE, text=True)
    stdout, stderr = proc.communicate(timeout=180)
    assert proc.returncode == 0, stderr
    rows = json.loads(stdout)  # only rank 0 printed
    # 1 kB and 8 kB (factor 2: 1, 2, 4, 8 kB) for all_reduce and all_gather
    assert len(rows) == 8 and all(r["wrong"] == 0 and r["ranks"] == 2 for r in rows)
