"""Published training configurations against the memory model (issue 11, Must 2 and 3).

``validation/data/memory_runs.toml`` holds 52 published configurations that ran and 5 that ran
out of memory, each cited. For each, :func:`judge` builds the scenario from the knobs the source
states (the estimate fits the rest, :mod:`willitscale.estimation.fit`) and records the verdict;
where the source measured its memory, it also predicts the quantity the source read (nvidia-smi
or ``torch.cuda.max_memory_allocated``) with the knobs the publisher's scripts set. The table
and the test (``tests/golden/test_memory_published.py``) are built from :func:`judge_all`.
"""

from __future__ import annotations

import statistics
import tomllib
from dataclasses import dataclass
from importlib import resources

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario
from willitscale.scenario.settings import parse_setting

__all__ = ["MemoryRun", "Judgement", "ErrorSummary", "memory_runs", "judge", "judge_all",
           "error_summary", "MEASURED_UNITS"]

MIB = 2 ** 20
#: bytes per unit of a measured value (see the data file's header)
MEASURED_UNITS = {"MiB": MIB, "GB-nvidia-smi": 1000 * MIB}


@dataclass(frozen=True, slots=True, kw_only=True)
class MemoryRun:
    id: str
    group: str
    source: str
    quote: str
    settings: dict  #: parsed to SI (willitscale.scenario.settings)
    documented: dict  #: added for the memory comparison
    ran: bool  #: False for a published out-of-memory run
    refused_before: bool  #: refused by main at 69473e3
    measured: float | None = None  #: bytes
    quantity: str = ""  #: "nvidia-smi" or "max_memory_allocated"
    how: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Judgement:
    run: MemoryRun
    verdict: str  #: fits, tight, does not fit
    need: float  #: bytes per GPU the fitted plan needs (allocated + context + NCCL)
    knobs: str  #: what the fit took, "" when nothing was fitted
    predicted: float | None = None  #: bytes of the measured quantity, documented knobs
    framework: str = ""

    @property
    def error(self) -> float | None:
        if self.predicted is None or self.run.measured is None:
            return None
        return (self.predicted - self.run.measured) / self.run.measured


def _settings(table: dict) -> dict:
    models = resources.files("willitscale.validation") / "data" / "models"
    out = {}
    for key, value in table.items():
        if key == "model" and str(value).endswith(".toml"):
            out[key] = str(models / value)
        else:
            out[key] = parse_setting(key, value, field=key)
    return out


def memory_runs() -> list[MemoryRun]:
    """Every row of the data file, runs first, then the out-of-memory ones."""
    path = resources.files("willitscale.validation") / "data" / "memory_runs.toml"
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    for kind in ("run", "oom"):
        for row in data[kind]:
            measured = row.get("measured")
            out.append(MemoryRun(
                id=row["id"], group=row.get("group", "published out-of-memory"),
                source=row["source"], quote=row["quote"], settings=_settings(row["settings"]),
                documented=_settings(row.get("documented", {})), ran=kind == "run",
                refused_before=row["refused_at_69473e3"],
                measured=None if measured is None else measured["value"] * MEASURED_UNITS[measured["unit"]],
                quantity="" if measured is None else measured["quantity"],
                how="" if measured is None else measured["how"]))
    return out


def judge(run: MemoryRun) -> Judgement:
    """The verdict on the stated knobs (the rest fitted) and, where measured, the prediction of
    the measured quantity with the documented knobs."""
    est = estimate(build_scenario(run.settings), allow_oom=True)
    predicted = None
    if run.measured is not None:
        documented = estimate(build_scenario({**run.settings, **run.documented}), allow_oom=True)
        memory = documented.memory
        predicted = memory.allocated if run.quantity == "max_memory_allocated" else memory.device
    return Judgement(run=run, verdict=est.memory.verdict or "unknown", need=est.memory.total,
                     knobs=est.knobs.get("reason", ""), predicted=predicted,
                     framework=est.memory.framework)


def judge_all() -> list[Judgement]:
    return [judge(run) for run in memory_runs()]


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorSummary:
    """Relative errors (predicted - measured) / measured of the measured test rows."""

    rows: int
    mean_abs: float
    median_abs: float
    worst: float  #: the signed error of largest magnitude
    bias: float  #: the mean signed error (> 0: over-predicted)
    within_10: int  #: rows within 10%


def error_summary(judgements) -> ErrorSummary:
    """The :class:`ErrorSummary` of the judgements that have an error (a measured quantity)."""
    errors = [j.error for j in judgements if j.error is not None]
    if not errors:
        raise ValueError("no measured rows")
    return ErrorSummary(
        rows=len(errors), mean_abs=statistics.fmean(abs(e) for e in errors),
        median_abs=statistics.median(abs(e) for e in errors),
        worst=max(errors, key=abs), bias=statistics.fmean(errors),
        within_10=sum(abs(e) < 0.10 for e in errors))


def _print_report() -> None:  # pragma: no cover - the command docs/memory.md names
    judgements = judge_all()
    gib = 2 ** 30
    print("| id | ran | refused at 69473e3 | verdict (stated knobs, rest fitted) | needs GiB "
          "| measured GiB | predicted GiB | error |")
    print("|---|---|---|---|---|---|---|---|")
    for j in judgements:
        r = j.run
        meas = "" if r.measured is None else f"{r.measured / gib:.2f} ({r.quantity})"
        pred = "" if j.predicted is None else f"{j.predicted / gib:.2f}"
        err = "" if j.error is None else f"{100 * j.error:+.1f}%"
        print(f"| {r.id} | {'yes' if r.ran else 'OOM'} | {'yes' if r.refused_before else 'no'} | "
              f"{j.verdict} | {j.need / gib:.1f} | {meas} | {pred} | {err} |")
    working = [j for j in judgements if j.run.ran]
    refused = sum(j.verdict == "does not fit" for j in working)
    print(f"\nworking configurations: {len(working)}, refused: {refused}")
    for label, quantity in (("all measured", None), ("nvidia-smi", "nvidia-smi"),
                            ("max_memory_allocated", "max_memory_allocated")):
        rows = [j for j in working if quantity is None or j.run.quantity == quantity]
        s = error_summary(rows)
        print(f"{label}: {s.rows} test rows, mean |error| {100 * s.mean_abs:.1f}%, median "
              f"{100 * s.median_abs:.1f}%, worst {100 * s.worst:+.1f}%, bias {100 * s.bias:+.1f}%, "
              f"within 10%: {s.within_10}")


def _print_breakdown() -> None:  # pragma: no cover - the command docs/memory.md names
    """Each measured row's predicted components (documented knobs) next to the measurement."""
    gib = 2 ** 30
    print("| id | framework, ZeRO | weights | grads | master | optimizer | activations | buffers "
          "| workspace | step temps | allocated | reserve | context | NCCL | predicted | measured "
          "| (measured - context - NCCL) / allocated |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for run in memory_runs():
        if run.measured is None:
            continue
        plan_settings = {**run.settings, **run.documented}
        m = estimate(build_scenario(plan_settings), allow_oom=True).memory
        parts = (m.weights, m.gradients, m.master, m.optimizer, m.activations or 0.0, m.buffers,
                 m.workspace, m.step, m.allocated)
        predicted = m.allocated if run.quantity == "max_memory_allocated" else m.device
        other = 0.0 if run.quantity == "max_memory_allocated" else m.context + m.nccl
        print(f"| {run.id} | {m.framework} {plan_settings.get('zero', 0)} | "
              + " | ".join(f"{x / gib:.2f}" for x in parts)
              + f" | {m.reserved_ratio:g} | {m.context / gib:.2f} | {m.nccl / gib:.2f} | "
              f"{predicted / gib:.2f} | {run.measured / gib:.2f} | "
              f"{(run.measured - other) / m.allocated:.3f} |")


if __name__ == "__main__":
    import sys

    _print_breakdown() if "--breakdown" in sys.argv[1:] else _print_report()
