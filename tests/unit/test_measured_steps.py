"""The comparison of measured training steps with a measured profile (calibrate.measured_steps,
``validate --profile --steps``), on the SYNTHETIC fixture tests/data/gpu-profile/ -- nothing in it
is measured. How it was made (scripts/make_synthetic_gpu_fixture.py): every step is what
calibrate.step_model predicts from synthetic-profile.toml with known step constants
(step_overhead 4 ms, memory_scale 1.08, reserved_ratio 1.15); the GPT-2 small (fit) rows are
left as they are, each test row's step time multiplied by (1 + d_step) and its peak memory by
(1 + d_mem). So, if the comparison works:

* the fit recovers the three constants exactly (the fit rows carry no perturbation);
* a test row's error is predicted / measured - 1 = 1 / (1 + d) - 1 (the prediction is the
  unperturbed value), for step time, allocated and reserved memory alike (reserved = allocated x
  1.15 in both).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
from pathlib import Path

import pytest

from willitscale.calibrate.measured_steps import (
    StepsFile,
    compare_steps,
    fit_constants,
    load_steps,
    role_of,
)
from willitscale.errors import ConfigError
from willitscale.hardware.calibration import load_calibration

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests/data/gpu-profile"
PROFILE, STEPS = DATA / "synthetic-profile.toml", DATA / "synthetic-steps.toml"
#: the perturbations the fixture was made with, (model, batch, seq) -> (d_step, d_mem)
DELTAS = {("gpt2-medium", 8, 1024): (0.03, -0.04), ("gpt2-medium", 16, 512): (-0.05, 0.02),
          ("gpt2-large", 4, 1024): (0.07, 0.05), ("gpt2-large", 8, 512): (-0.02, -0.06),
          ("llama-1b", 4, 2048): (0.04, 0.03), ("llama-1b", 2, 4096): (-0.06, -0.01)}


@pytest.fixture(scope="module")
def comparison():
    return compare_steps(load_calibration(PROFILE), load_steps(STEPS))


def test_fixture_is_labelled_synthetic_and_reproducible(tmp_path):
    assert load_steps(STEPS).synthetic and "NOT a measurement" in STEPS.read_text()
    assert "NOT a measurement" in PROFILE.read_text()
    spec = importlib.util.spec_from_file_location("gen", ROOT / "scripts/make_synthetic_gpu_fixture.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    gen.write(tmp_path)
    for name in ("synthetic-profile.toml", "synthetic-steps.toml"):
        assert (tmp_path / name).read_text() == (DATA / name).read_text()


def test_fit_rows_are_gpt2_small_only_and_recover_the_constants(comparison):
    roles = {(r.step.model, r.role) for r in comparison.rows}
    assert roles == {("gpt2", "fit"), ("gpt2-medium", "test"), ("gpt2-large", "test"), ("llama-1b", "test")}
    c = comparison.constants
    assert comparison.fit_rows == 3
    assert c.step_overhead == pytest.approx(4e-3, rel=1e-9)
    assert c.memory_scale == pytest.approx(1.08, rel=1e-9)
    assert c.reserved_ratio == pytest.approx(1.15, rel=1e-9)


def test_each_test_row_error_is_the_known_perturbation(comparison):
    for r in comparison.test_rows:
        d_step, d_mem = DELTAS[(r.step.model, r.step.batch, r.step.seq_len)]
        assert r.step_error == pytest.approx(1 / (1 + d_step) - 1, abs=1e-9)
        assert r.allocated_error == pytest.approx(1 / (1 + d_mem) - 1, abs=1e-9)
        assert r.reserved_error == pytest.approx(1 / (1 + d_mem) - 1, abs=1e-8)
    # all perturbations are within 7%: every test row passes the 10% tolerance
    assert comparison.passed
    # worst step error: gpt2-large 4 x 1024, d = +7%: |1/1.07 - 1| = 6.54%
    assert comparison.worst("step") == pytest.approx(1 - 1 / 1.07, abs=1e-9)


def test_a_test_row_off_by_15_percent_fails_and_does_not_move_the_fit():
    steps = load_steps(STEPS)
    cal = load_calibration(PROFILE)
    bad = tuple(dataclasses.replace(s, step=s.step * 1.15) if s.model == "llama-1b" and s.batch == 4 else s
                for s in steps.steps)
    result = compare_steps(cal, StepsFile(steps=bad, synthetic=True, generated_by="x"))
    assert not result.passed
    (row,) = [r for r in result.rows if not r.within]
    # measured x 1.15 x 1.04 against the unperturbed prediction: 1 / (1.04 x 1.15) - 1 = -16.4%
    assert row.step_error == pytest.approx(1 / (1.04 * 1.15) - 1, abs=1e-9)
    # test rows never set a constant
    assert fit_constants(cal, bad) == fit_constants(cal, steps.steps)
    assert role_of(bad[0]) == "fit"


def test_validate_prints_synthetic_and_the_verdict(cli):
    code, out, err = cli("validate", "--profile", str(PROFILE), "--steps", str(STEPS))
    assert code == 0, err
    assert "SYNTHETIC" in out and "every test row within 10%: yes" in out
    code, out, err = cli("validate", "--profile", str(PROFILE), "--steps", str(STEPS), "--json")
    data = json.loads(out)
    assert data["synthetic"] and data["passed"] and len(data["rows"]) == 9


def test_a_synthetic_file_must_say_how_it_was_made(tmp_path):
    text = STEPS.read_text().replace('generated_by = "scripts', 'generated_by = "" # "scripts')
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="generated_by"):
        load_steps(path)


def test_steps_from_train_rows_keep_one_gpu_rows_with_a_peak(tmp_path):
    from willitscale.calibrate.measured_steps import steps_from_train_rows, steps_toml
    from willitscale.results.records import TrainRow

    common = dict(model="gpt2", layers=12, hidden=768, heads=12, vocab=50257, seq_len=1024,
                  params=124_439_808, batch_per_rank=8, nodes=1, dtype="bfloat16",
                  bucket_bytes=2**20, step=0.05, forward=0.015, backward=0.03,
                  backward_no_sync=0.03, optimizer=0.005, steps=10)
    gpu = TrainRow(**common, ranks=1, device="NVIDIA H100 80GB HBM3", peak_allocated_bytes=9 * 2**30,
                   peak_reserved_bytes=10 * 2**30)
    cpu = TrainRow(**common, ranks=1, device="cpu")
    steps, notes = steps_from_train_rows([(4, [gpu]), (5, [cpu])])
    assert len(steps) == 1 and steps[0].run == 4 and steps[0].peak_allocated == 9 * 2**30
    assert len(notes) == 1 and "run 5" in notes[0]
    path = tmp_path / "steps.toml"
    path.write_text(steps_toml(steps, synthetic=False))
    back = load_steps(path)
    assert not back.synthetic and back.steps == tuple(steps)
