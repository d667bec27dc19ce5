"""``willitscale validate --profile FILE --steps FILE``: measured training steps against what a
measured profile predicts for them (:mod:`willitscale.calibrate.measured_steps`)."""

from __future__ import annotations

import argparse

__all__ = ["run_steps", "add_steps_flags"]


def add_steps_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", default=None, metavar="FILE",
                   help="a measured profile (format 2); with --steps: predict measured training "
                        "steps from its curves (GPT-2 small steps fit, the others are tests)")
    p.add_argument("--steps", default=None, metavar="FILE",
                   help="measured training steps (tests/data/gpu-profile/ has the format)")


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def run_steps(args: argparse.Namespace) -> int:
    from willitscale.calibrate.measured_steps import (
        TOLERANCE,
        compare_steps,
        load_steps,
    )
    from willitscale.cli.output import print_json, print_table
    from willitscale.errors import ConfigError
    from willitscale.hardware.calibration import load_calibration

    if not (args.profile and args.steps):
        raise ConfigError("--profile/--steps", args.profile or args.steps,
                          "both: a measured profile and a steps file")
    if args.run_ids:
        raise ConfigError("RUN_ID", args.run_ids, "none with --profile/--steps (they come from the files)")
    result = compare_steps(load_calibration(args.profile), load_steps(args.steps))
    label = "SYNTHETIC (generated from a model, not measured)" if result.synthetic else "measured"
    c = result.constants
    if args.json:
        print_json({"synthetic": result.synthetic, "passed": result.passed, "tolerance": TOLERANCE,
                    "fit_rows": result.fit_rows,
                    "constants": {"step_overhead_s": c.step_overhead, "memory_scale": c.memory_scale,
                                  "reserved_ratio": c.reserved_ratio},
                    "rows": [{"model": r.step.model, "batch": r.step.batch, "seq_len": r.step.seq_len,
                              "role": r.role, "step_s": r.step.step, "predicted_step_s": r.predicted_step,
                              "step_error": r.step_error,
                              "peak_allocated_bytes": r.step.peak_allocated,
                              "predicted_peak_allocated_bytes": r.predicted_allocated,
                              "allocated_error": r.allocated_error,
                              "peak_reserved_bytes": r.step.peak_reserved,
                              "predicted_peak_reserved_bytes": r.predicted_reserved,
                              "reserved_error": r.reserved_error} for r in result.rows]})
        return 0
    body = [[r.step.model, f"{r.step.batch} x {r.step.seq_len}", r.role,
             f"{r.step.step * 1e3:.1f}", f"{r.predicted_step * 1e3:.1f}", _pct(r.step_error),
             f"{r.step.peak_allocated / 2**30:.2f}", f"{r.predicted_allocated / 2**30:.2f}",
             _pct(r.allocated_error), _pct(r.reserved_error)] for r in result.rows]
    print_table(f"training steps: {label}", ["model", "batch x seq", "role", "step", "predicted",
                                              "error", "peak alloc", "predicted", "error",
                                              "reserved error"],
                body, units=["", "", "", "(ms)", "(ms)", "", "(GiB)", "(GiB)", "", ""],
                caption=f"fit on {result.fit_rows} GPT-2 small step(s): step overhead "
                        f"{c.step_overhead * 1e3:.2f} ms, memory x {c.memory_scale:.3f}, "
                        f"reserved/allocated {c.reserved_ratio:.3f}")
    tests = result.test_rows
    verdict = "yes" if result.passed else "NO"
    print(f"{label}: {len(tests)} test rows; worst step-time error {result.worst('step'):.1%}, "
          f"worst peak-memory error {max(result.worst('allocated'), result.worst('reserved')):.1%}; "
          f"every test row within {TOLERANCE:.0%}: {verdict}")
    return 0
