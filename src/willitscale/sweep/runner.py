"""Running a sweep's points: in this process, on a pool of worker processes, or on a Ray cluster.

Whatever runs them, each finished point's row is written at once by this process
(:mod:`willitscale.sweep.output`), so an interruption keeps every finished point: Ctrl-C and
SIGTERM stop the workers and close the file; a Ray worker that is lost has its tasks retried
by Ray, and points whose task still fails are left unfinished (a rerun runs them). Points the
file already holds are skipped. The rows do not depend on where a point ran: the same grid
gives the same rows with one worker, many, or Ray.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

from willitscale.errors import ConfigError, MissingDependency
from willitscale.sweep.grid import Grid, Point
from willitscale.sweep.output import KEY_COLUMN
from willitscale.sweep.points import KINDS, evaluate

__all__ = ["SweepSummary", "columns_of", "map_on_pool", "run_sweep"]

#: points one Ray task runs (a task per point would spend more on scheduling than on work)
RAY_BATCH = 16


def columns_of(grid: Grid) -> tuple[str, ...]:
    """The output's columns: the point's key and seed, its settings, the results, an error."""
    return (KEY_COLUMN, "seed", *grid.setting_names, *KINDS[grid.kind].columns, "error")


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepSummary:
    """What one run of a sweep did."""

    points: int  #: points in the grid
    skipped: int  #: already in the output file before this run
    ran: int  #: finished in this run
    errors: int  #: of those, points that could not run (their row says why)
    lost: int = 0  #: points whose task failed on Ray (not written; a rerun runs them)

    @property
    def complete(self) -> bool:
        return self.skipped + self.ran == self.points


def _row(kind: str, point: Point) -> dict:
    results, error = evaluate(kind, point.settings, point.seed, base=point.base)
    return {KEY_COLUMN: point.key, "seed": point.seed, **point.settings, **results, "error": error}


def _rows_of_batch(kind: str, points: list[Point]) -> list[dict]:
    return [_row(kind, p) for p in points]


def _ignore_sigint() -> None:
    """Pool workers leave Ctrl-C to the parent, which stops them."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _in_process(kind: str, todo: Sequence[Point]) -> Iterator[dict]:
    for point in todo:
        yield _row(kind, point)


def _on_pool(kind: str, todo: Sequence[Point], workers: int) -> Iterator[dict]:
    import multiprocessing

    # spawn: workers start clean (no copy of this process's threads, e.g. the progress bar's)
    pool = multiprocessing.get_context("spawn").Pool(workers, initializer=_ignore_sigint)
    try:
        chunk = max(1, min(32, len(todo) // (workers * 8)))
        tasks = [(kind, list(todo[i:i + chunk])) for i in range(0, len(todo), chunk)]
        for rows in pool.imap_unordered(_batch_task, tasks):
            yield from rows
        pool.close()
    finally:
        pool.terminate()
        pool.join()


def _batch_task(task: tuple[str, list[Point]]) -> list[dict]:
    return _rows_of_batch(*task)


def map_on_pool(fn: Callable, items: Sequence, workers: int) -> list:
    """``[fn(item) for item in items]`` on ``workers`` fresh processes (``fn`` importable by
    name, items and results picklable), in the order of ``items``. Ctrl-C stops the workers."""
    import multiprocessing

    pool = multiprocessing.get_context("spawn").Pool(min(workers, max(len(items), 1)),
                                                     initializer=_ignore_sigint)
    try:
        out = pool.map(fn, items, chunksize=1)
        pool.close()
        return out
    finally:
        pool.terminate()
        pool.join()


def _ray():
    try:
        import ray
    except ImportError:
        raise MissingDependency("ray", "ray", "Running a sweep on a Ray cluster (--ray)") from None
    return ray


def _on_ray(kind: str, todo: Sequence[Point], address: str, lost: list[Point]) -> Iterator[dict]:
    ray = _ray()
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except (ConnectionError, ValueError, RuntimeError) as exc:
            raise ConfigError("--ray", address, f"the address of a running Ray cluster ({exc})") from None
    pending: dict = {}
    try:
        remote = ray.remote(max_retries=3)(_rows_of_batch)
        for i in range(0, len(todo), RAY_BATCH):
            batch = list(todo[i:i + RAY_BATCH])
            pending[remote.remote(kind, batch)] = batch
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            batch = pending.pop(done[0])
            try:
                rows = ray.get(done[0])
            except ray.exceptions.RayTaskError:  # the point's own code failed: a bug, not a lost worker
                raise
            except ray.exceptions.RayError:  # a worker or node lost beyond Ray's retries: rerun later
                lost.extend(batch)
                continue
            yield from rows
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started_here:
            ray.shutdown()


def run_sweep(grid: Grid, rows, *, workers: int = 1, ray_address: str | None = None,
              on_row: Callable[[dict], None] | None = None) -> SweepSummary:
    """Run the points of ``grid`` that ``rows`` (an open row file) does not hold yet.

    ``workers``: 1 runs in this process, more on a process pool of that size; ``ray_address``
    runs on the Ray cluster there instead. ``on_row`` is called after each row is written.
    A KeyboardInterrupt or SIGTERM stops the workers; the rows written so far stay.
    """
    if workers < 1:
        raise ConfigError("--workers", workers, "an integer >= 1")
    todo = [p for p in grid.points if p.key not in rows.finished]
    skipped = len(grid.points) - len(todo)
    lost: list[Point] = []
    if ray_address is not None:
        source = _on_ray(grid.kind, todo, ray_address, lost)
    elif workers == 1 or len(todo) <= 1:
        source = _in_process(grid.kind, todo)
    else:
        source = _on_pool(grid.kind, todo, min(workers, len(todo)))
    ran = errors = 0
    previous = _on_sigterm(_terminate)
    complete = False
    try:
        for row in source:
            rows.add(row)
            ran += 1
            errors += bool(row["error"])
            if on_row is not None:
                on_row(row)
        complete = skipped + ran == len(grid.points)
    finally:
        source.close()
        _on_sigterm(previous)
        rows.close(order=[p.key for p in grid.points] if complete else None)
    return SweepSummary(points=len(grid.points), skipped=skipped, ran=ran, errors=errors, lost=len(lost))


def _on_sigterm(handler):
    """Install ``handler`` for SIGTERM (only the main thread may); the one it replaces."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGTERM, handler)


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised in the main thread like Ctrl-C so the same clean-up runs."""


def _terminate(signum, frame) -> None:
    raise Terminated(f"signal {signum}")


def default_workers() -> int:
    """Every core this process may use."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
