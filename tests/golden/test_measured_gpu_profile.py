"""Issue 18's acceptance on MEASURED fixtures: every tests/data/gpu-profile/<name>-steps.toml
with ``synthetic = false`` and its profile <name>.toml (written by ``calibrate --profile`` on a
GPU: scripts/gpu_capture.sh, docs/measure.md "Measuring on an H100/H200"). Skipped while no
measured fixture is committed -- none is yet: this branch was written without a GPU.

Checked per fixture: >= 50 GEMM points, >= 10 attention points, >= 6 training steps with peak
memory, the provenance filled in, and every test row (all but GPT-2 small) predicted within 10%
on step time and peak memory (the rule of calibrate.measured_steps)."""

from __future__ import annotations

from pathlib import Path

import pytest

from willitscale.calibrate.measured_steps import TOLERANCE, compare_steps, load_steps
from willitscale.hardware.calibration import load_calibration

DATA = Path(__file__).resolve().parents[1] / "data" / "gpu-profile"
MEASURED = sorted(p for p in DATA.glob("*-steps.toml") if not load_steps(p).synthetic)


@pytest.mark.skipif(not MEASURED, reason="no measured GPU fixture committed yet (needs a GPU session)")
@pytest.mark.parametrize("steps_path", MEASURED, ids=[p.name for p in MEASURED])
def test_measured_profile_predicts_the_test_steps(steps_path):
    profile = load_calibration(steps_path.with_name(steps_path.name.removesuffix("-steps.toml") + ".toml"))
    prov = profile.provenance
    assert prov is not None and prov.gpu and prov.device and prov.driver and prov.cuda and prov.torch and prov.date
    assert sum(g.points for g in profile.section("gemm")) >= 50
    assert sum(a.points for a in profile.section("attention")) >= 10
    steps = load_steps(steps_path)
    assert len(steps.steps) >= 6
    result = compare_steps(profile, steps)
    assert len(result.test_rows) >= 1
    for row in result.test_rows:
        assert abs(row.step_error) <= TOLERANCE, (row.step, row.step_error)
        assert abs(row.allocated_error) <= TOLERANCE, (row.step, row.allocated_error)
        assert abs(row.reserved_error) <= TOLERANCE, (row.step, row.reserved_error)
