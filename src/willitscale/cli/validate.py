"""``willitscale validate [--calibration FILE] [RUN_ID ...]`` or ``validate --published``.

How far is the model from what was measured? With --published: every published training run of
the validation set (docs/validation.md), the test rows by default, with the error summary by
GPU, parallelism and dtype. Otherwise every stored run the calibration can predict (or the runs given), row by row, with the
relative error of each prediction and whether the row was one the calibration was fitted to
(in-sample) or a real test (out-of-sample). Without --calibration, the latest one
``willitscale calibrate`` wrote. With --nccl-tests: the NCCL collective model against the
published nccl-tests sweeps of its validation set, error per size band (test rows by default).
"""

from __future__ import annotations

import argparse
import sys

from willitscale.cli.plot_flag import add_plot_flag
from willitscale.cli.validate_steps import add_steps_flags, run_steps

__all__ = ["register"]


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser("validate", help="how far the model's predictions are from the measurements",
                              description=__doc__.split("\n\n", 1)[1].replace("``", ""), epilog=examples(
                                  "willitscale validate",
                                  "willitscale validate --published",
                                  "willitscale validate --calibration cluster.toml 7 8 --plot figs",
                                  "willitscale validate --nccl-tests --quality good"))
    p.add_argument("run_ids", type=int, nargs="*", metavar="RUN_ID",
                   help="stored runs to predict (default: every run the calibration can predict)")
    p.add_argument("--calibration", default=None, help="a calibration file (default: the latest)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--published", action="store_true",
                   help="the compute model against published training runs (docs/validation.md)")
    p.add_argument("--nccl-tests", action="store_true",
                   help="the NCCL model against the published nccl-tests sweeps (no store, no calibration)")
    p.add_argument("--side", choices=("test", "fit", "all"), default="test",
                   help="with --published or --nccl-tests: which rows (default test; all: --published only)")
    p.add_argument("--quality", choices=("all", "good"), default="all",
                   help="with --nccl-tests: every sweep (default) or only those graded good with the data")
    p.add_argument("--markdown", action="store_true",
                   help="with --published: the tables as Markdown (docs/validation.md)")
    p.add_argument("--job", default=None, metavar="FILE",
                   help="the job a traced run ran (a scenario file: TOML with its cluster, "
                        "torchtitan, Megatron-LM, NeMo): predicts the trace's compute per op kind")
    add_plot_flag(p)
    add_steps_flags(p)
    p.set_defaults(run=run)


def _calibration(store, path: str | None):
    from willitscale.config import load_toml
    from willitscale.errors import StoreError
    from willitscale.hardware.calibration import Calibration, load_calibration

    if path:
        return load_calibration(path), path
    stored = store.calibrations()
    if not stored:
        raise StoreError("no calibration yet: run `willitscale calibrate` (or give --calibration FILE)")
    latest = stored[0]
    import tomllib

    try:
        data = tomllib.loads(latest.toml)
    except tomllib.TOMLDecodeError:  # pragma: no cover - we wrote it
        data = load_toml(latest.path)
    return Calibration.from_toml_data(data, where=latest.path), latest.path


def _nccl_tests(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.validation.nccl_check import report_lines, validation_report

    report = validation_report(args.side, args.quality)
    if args.json:
        print_json(report)
    else:
        print("\n".join(report_lines(report)))
    return 0


def run(args: argparse.Namespace) -> int:
    if args.job and (args.profile or args.steps or args.published or args.nccl_tests):
        from willitscale.errors import ConfigError

        raise ConfigError("--job", args.job, "with stored runs only (not --published, "
                                             "--nccl-tests or --profile/--steps)")
    if args.profile or args.steps:  # measured training steps vs a measured profile
        return run_steps(args)
    if args.nccl_tests:
        from willitscale.errors import ConfigError

        if args.published or args.markdown or args.side == "all" or args.run_ids or args.calibration:
            raise ConfigError("--nccl-tests takes --side test|fit, --quality and --json only")
        return _nccl_tests(args)
    if args.quality != "all":
        from willitscale.errors import ConfigError

        raise ConfigError("--quality goes with --nccl-tests")
    if args.published:
        from willitscale.cli.validate_published import run_published

        if args.run_ids or args.calibration or args.plot:
            from willitscale.errors import ConfigError

            raise ConfigError("--published takes no run ids, --calibration or --plot")
        return run_published(args)
    if args.side != "test" or args.markdown:
        from willitscale.errors import ConfigError

        raise ConfigError("--side and --markdown go with --published (or --side with --nccl-tests)")
    from willitscale.calibrate.runs import measured_run
    from willitscale.calibrate.trace_kinds import trace_source, trace_steps
    from willitscale.calibrate.validate import Skipped, compare
    from willitscale.cli.output import print_json, print_table
    from willitscale.errors import ConfigError
    from willitscale.results.store import Store

    with Store() as store:
        cal, path = _calibration(store, args.calibration)
        ids = args.run_ids or [info.id for info in reversed(store.runs())]
        runs, unreadable, traced = [], [], {}
        for i in ids:
            stored = store.run(i)
            if not stored.info.rows:
                continue
            traced[i] = (trace_source(stored.info.source), trace_steps(stored.info.options))
            try:
                runs.append(measured_run(stored))
            except ConfigError as exc:
                unreadable.append(Skipped(run_id=i, kind=stored.info.kind, reason=str(exc)))
    rows, skipped = compare(runs, cal)
    skipped = unreadable + skipped
    kinds = _trace_kinds(traced, rows, args.job)
    errors_in = [abs(r.error) for r in rows if r.in_sample]
    errors_out = [abs(r.error) for r in rows if not r.in_sample]
    if args.plot and rows:
        _plot(args.plot, rows)
    summary = {"rows": len(rows), "in_sample": len(errors_in), "out_of_sample": len(errors_out),
               "max_abs_error_in_sample": max(errors_in, default=None),
               "max_abs_error_out_of_sample": max(errors_out, default=None)}
    if args.json:
        print_json({"calibration": path, "rows": rows, "skipped": skipped, "summary": summary,
                    "trace_kinds": [{"run_ids": list(ids), "trace": source,
                                     "rows": [r.to_json() for r in k]}
                                    for (ids, source), k in kinds.items()]})
        return 0
    print_table(f"predicted vs measured ({path})",
                ["run", "point", "measured", "predicted", "error", "fit"],
                [[r.run_id, r.point, f"{r.measured * 1e3:.4g}", f"{r.predicted * 1e3:.4g}",
                  f"{r.error:+.1%}", "in-sample" if r.in_sample else "out"] for r in rows],
                units=["", "", "(ms)", "(ms)", "", ""],
                caption="error = (predicted - measured) / measured; in-sample rows were fitted")
    memory = [r for r in rows if "peak_allocated_bytes" in r.details]
    if memory:
        from willitscale.units import format_size

        gib = lambda x: format_size(x, binary=True)  # noqa: E731
        print_table("peak memory per GPU: torch.cuda.max_memory_allocated vs the estimate",
                    ["run", "point", "measured", "predicted", "error", "reserved (measured)"],
                    [[r.run_id, r.point, gib(r.details["peak_allocated_bytes"]),
                      gib(r.details["predicted_allocated_bytes"]), f"{r.details['memory_error']:+.1%}",
                      gib(r.details["peak_reserved_bytes"] or 0)] for r in memory],
                    caption="docs/memory.md; CPU runs record no peak")
    for (ids, source), found in kinds.items():
        _print_kinds(ids, source, found)
    for s in skipped:
        print(f"run {s.run_id} ({s.kind}) not predicted: {s.reason}", file=sys.stderr)
    return 0


def _trace_kinds(traced: dict, rows, job: str | None) -> dict:
    """``(run ids, trace)`` -> KindRows for each trace ``trace import`` stored (one run per
    group size, one table per trace), compute predicted from ``job``'s estimate when given."""
    from willitscale.calibrate.trace_kinds import kind_rows, predicted_compute_kinds

    traces: dict[str, tuple[list[int], list]] = {}
    for i, (source, steps) in traced.items():
        if steps:
            traces.setdefault(source, ([], steps))[0].append(i)
    if not traces:
        if job:
            from willitscale.errors import ConfigError

            raise ConfigError("--job", job, "with runs that `trace import` stored (none here)")
        return {}
    predicted, why = None, "no --job: give the traced job's scenario to predict compute"
    if job:
        from willitscale.estimation.estimate import estimate
        from willitscale.scenario.build import build_scenario
        from willitscale.scenario.settings import load_settings

        predicted = predicted_compute_kinds(estimate(build_scenario(load_settings(job)),
                                                     allow_oom=True))
        why = "the job's estimate used a flat efficiency: no per-op split"
    return {(tuple(ids), source): kind_rows(steps, [r for r in rows if r.run_id in ids],
                                            predicted, why)
            for source, (ids, steps) in traces.items()}


def _print_kinds(ids: tuple[int, ...], source: str, found) -> None:
    from willitscale.cli.output import print_table

    def ms(x):
        return "-" if x is None else f"{x * 1e3:.4g}"

    runs = ", ".join(map(str, ids))
    print_table(f"{source} (run{'s' if len(ids) > 1 else ''} {runs}): the traced step per op "
                "kind, means per step",
                ["op kind", "measured", "predicted", "error", "calls", "predicted by"],
                [[k.kind, ms(k.measured), ms(k.predicted),
                  "-" if k.error is None else f"{k.error:+.1%}",
                  "" if k.calls is None else f"{k.calls:g}", k.source] for k in found],
                units=["", "(ms)", "(ms)", "", "", ""],
                caption="compute: self time by kind (elementwise on a CPU trace includes the "
                        "framework's time between ops); collectives: the traced ones with a size")


def _plot(directory: str, rows) -> None:
    """Predicted vs measured for every row, and busbw vs size, measured and predicted, for
    the collective runs."""
    from willitscale.cli.plot_flag import write_plots
    from willitscale.cli.results import busbw_curves

    def charts():
        from willitscale.report.plots.measurements import (
            busbw_vs_size,
            predicted_vs_measured,
        )

        out = [predicted_vs_measured([r.measured for r in rows], [r.predicted for r in rows],
                                     in_sample=[r.in_sample for r in rows], unit="s")]
        coll = [r for r in rows if r.kind == "collectives"]
        if coll:
            def records(seconds):
                return [{"op": r.details["op"], "size_bytes": r.details["size_bytes"],
                         "ranks": r.details["ranks"], "nodes": r.details["nodes"],
                         "in_place": "in-place" in r.point, "t": seconds(r)} for r in coll]

            measured = busbw_curves(records(lambda r: r.measured), time_key="t", scale=1.0)
            predicted = busbw_curves(records(lambda r: r.predicted), time_key="t", scale=1.0)
            out.append(busbw_vs_size(measured, predicted, name="validate-busbw"))
        return out

    write_plots(directory, charts)
