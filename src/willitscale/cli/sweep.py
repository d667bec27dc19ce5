"""``willitscale sweep GRID.toml``: every point of a grid of scenarios, on every core or on Ray."""

from __future__ import annotations

import sys

from willitscale.errors import ConfigError

HELP = "run a grid of fabric simulations or estimates on every core or a Ray cluster, to CSV/Parquet"

DESCRIPTION = """\
Run every point of a grid of scenarios (fabric simulations or step-time estimates) and write one
row per point to a CSV or Parquet file. Points run on a pool of worker processes (--workers,
default every core) or on a running Ray cluster (--ray ADDRESS, the optional 'ray' extra). Each
row is written as soon as its point finishes: an interrupted sweep keeps its finished points,
and running the same command again skips them. docs/sweep.md describes the grid file."""


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser(
        "sweep", help=HELP, description=DESCRIPTION, epilog=examples(
            "willitscale sweep examples/sweeps/fabric.toml --out fabric.csv",
            "willitscale sweep examples/sweeps/fabric.toml --seeds 1-10 --workers 2 --out fabric.parquet",
            "willitscale sweep grid.toml --ray 10.0.0.1:6379 --out grid.parquet"))
    p.add_argument("grid", help="the grid file (TOML): kind, [fixed], [grid], [[points]], seeds")
    p.add_argument("--out", required=True, help="output file: .csv, or .parquet (the optional 'parquet' extra)")
    p.add_argument("--workers", type=int, default=None, help="worker processes (default: every core)")
    p.add_argument("--ray", metavar="ADDRESS", help="run on the Ray cluster at ADDRESS (e.g. 10.0.0.1:6379, "
                                                   "or 'auto') instead of local processes")
    p.add_argument("--seeds", help="fabric grids: routing seeds, e.g. 1-10 or 1,4,7 (overrides the file's)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(run=run)


def run(args) -> int:
    from willitscale.sweep.grid import load_grid, parse_seeds
    from willitscale.sweep.output import open_rows
    from willitscale.sweep.runner import columns_of, default_workers, run_sweep

    if args.workers is not None and args.workers < 1:
        raise ConfigError("--workers", args.workers, "an integer >= 1")
    if args.ray is not None and args.workers is not None:
        raise ConfigError("give --workers or --ray, not both (Ray decides where points run)")
    seeds = parse_seeds(args.seeds, field="--seeds") if args.seeds is not None else None
    grid = load_grid(args.grid, seeds=seeds)
    rows = open_rows(args.out, columns_of(grid))
    workers = args.workers or default_workers()
    todo = len(grid.points) - sum(p.key in rows.finished for p in grid.points)
    where = f"Ray at {args.ray}" if args.ray else f"{min(workers, max(todo, 1))} worker process(es)"
    print(f"{len(grid.points):,} points ({grid.kind}); {len(grid.points) - todo:,} already in {args.out}; "
          f"running {todo:,} on {where}", file=sys.stderr)
    try:
        with _progress(todo, disable=args.no_progress) as advance:
            summary = run_sweep(grid, rows, workers=workers, ray_address=args.ray, on_row=advance)
    except KeyboardInterrupt:
        print(f"interrupted: {len(rows.finished):,} of {len(grid.points):,} points are in {args.out}; "
              "run the same command again to finish the rest", file=sys.stderr)
        return 130
    print(f"{summary.ran:,} points run ({summary.errors:,} could not run: see the error column), "
          f"{summary.skipped:,} skipped (already done); {args.out} has "
          f"{summary.skipped + summary.ran:,} of {summary.points:,} points", file=sys.stderr)
    if summary.lost:
        print(f"{summary.lost:,} points were lost with their Ray workers; run the same command again "
              "to run them", file=sys.stderr)
        return 1
    return 0


class _progress:
    """A rich progress bar on stderr (only on a terminal); the context gives ``advance(row)``."""

    def __init__(self, total: int, *, disable: bool):
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        console = Console(stderr=True)
        self.bar = Progress("{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                            TimeRemainingColumn(), console=console, disable=disable or not console.is_terminal)
        self.task = self.bar.add_task("points", total=total)

    def __enter__(self):
        self.bar.start()
        return lambda row: self.bar.advance(self.task)

    def __exit__(self, *exc) -> None:
        self.bar.stop()
