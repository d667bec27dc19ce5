"""scripts/gpu_capture.sh runs, stage by stage, on this CPU with CAPTURE_QUICK=1 (tiny sweeps):
the script a GPU session runs in one go must not rot while no GPU is at hand. What a GPU gives
is not checked here (tests/distributed/test_bench_gpu.py is)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.distributed, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_quick_capture_writes_store_profile_and_status(tmp_path):
    out, home = tmp_path / "out", tmp_path / "home"
    env = {**os.environ, "OUT": str(out), "CAPTURE_HOME": str(home), "CAPTURE_QUICK": "1",
           "CAPTURE_GPU": "h100-sxm", "PYTHON": sys.executable}
    env.pop("WILLITSCALE_HOME", None)
    proc = subprocess.run([str(ROOT / "scripts/gpu_capture.sh"), "env", "bandwidth", "attention64",
                           "matmul", "profile", "report"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr
    status = (out / "capture/status.txt").read_text().splitlines()
    assert [line.split()[0] for line in status] == ["env", "bandwidth", "attention64", "matmul", "profile", "report"]
    assert all(" rc=0 " in line for line in status), status
    assert (out / "capture/home/results.sqlite").is_file()
    from willitscale.hardware.calibration import load_calibration

    cal = load_calibration(out / "capture/measured-profile-h100-sxm.toml")
    assert set(cal.sections) == {"memory", "gemm", "attention"}
    assert cal.provenance.gpu == "h100-sxm"
    assert (out / "capture/results.json").is_file()
    report = (out / "capture/report/report.md").read_text()
    assert "### Attention" in report and "### GEMM (squares)" in report
