"""How fast one plan is estimated: ``estimate()`` and the engine alone, against the previous engine.

    python benchmarks/engine_speed.py [--long] [--previous REV]

The previous engine is the whole package as it was at git revision ``REV`` (default
:data:`PREVIOUS`, the commit before issue 14's engine work), read from this checkout's git
history at run time (``git archive``), renamed ``willitscale_previous`` in a temporary folder and
imported beside today's package, so both run in this one process and every ratio is measured in
this run, calls interleaved (old, new, old, new, ...) so load from other jobs hits both alike.
Nothing of it is kept in the repository: it is our own earlier code, one command away.

Figures (medians of the calls, warm: the first call of each is not timed):

* ``estimate()`` of the acceptance scenario of issue 14 (GPT-3 175B on 128 x 8 A100 80GB, TP 8,
  PP 8, DP 16, global batch 1,536, 2,048 tokens, full recomputation, analytic network), with its
  fitted knobs, verdict and timeline: goal <= 10 ms;
* the engine alone, ``step.evaluate.run(context, one plan, detail=True)`` on a context made once
  (today's keeps its collective lines, per-op compute and placements per context): goal
  <= 2 ms; and the same with a fresh context made in the call (``new_context`` + ``run``; the
  previous ``make_context`` made a fresh one every call), the cold figure;
* ``estimate()`` of a scenario object never estimated before (built beforehand, one per call):
  the cold figure, without the context today's ``make_context`` keeps per scenario;
* the same four for a data-parallel job the inter-node network limits (the handbook's 2B model,
  4 nodes at 25 Gb/s), whose computed fixes search the bandwidth that would fix it;
* the same four for the acceptance scenario on a simulated fabric (issue 14's acceptance command:
  ``--network flow --topology fat-tree --oversubscription 4``), goal <= 10 ms for ``estimate()``
  too; here the network is the bottleneck, so the estimate also computes its fixes (the
  bandwidth search, more accumulation, larger micro-batches, bf16 gradients). Its warm figures
  reuse the fabric simulations kept per (fabric, geometry) and concurrent set
  (:mod:`willitscale.step.flow_network`), so it also reports the **first call**: a fresh Python
  process per call (imports done, the scenario built, then one ``estimate()`` timed: the
  simulations included), median of :data:`FIRST_CALLS` processes per engine, interleaved.

Prints ratios measured in this run; the goals are checked by ``benchmarks/run.py``.
"""

from __future__ import annotations

import argparse
import importlib
import re
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path

from _headlines import Headline, emit, long_flag

import willitscale

#: the commit before issue 14's engine work (main at 1fc7e28, "The DDP trace test runs the
#: recording script users run ..."): the previous engine the ratios compare with
PREVIOUS = "1fc7e28"
ALIAS = "willitscale_previous"

ACCEPTANCE = dict(model="gpt3-175b", gpu="a100-80gb", nodes=128, gpus_per_node=8, tp=8, pp=8,
                  dp=16, global_batch=1536, seq_len=2048, recompute="full")
FLOW = dict(ACCEPTANCE, network="flow", topology="fat-tree", oversubscription=4)
#: fresh processes per engine for the first-call figure of the simulated fabric
FIRST_CALLS = 3
NETWORK_BOUND = dict(params=2e9, gpu="a100-80gb", nodes=4, gpus_per_node=8, inter_node="25Gbps",
                     micro_batch=2, seq_len=2048, recompute="full", hfu=0.5,
                     grad_reduce_dtype="fp32")


def previous_package(rev: str, into: Path):
    """The package at ``rev`` imported as :data:`ALIAS` (its ``willitscale`` names rewritten)."""
    root = Path(willitscale.__file__).resolve().parents[2]
    archive = subprocess.run(["git", "-C", str(root), "archive", "--format=tar", rev, "src/willitscale"],
                             check=True, capture_output=True).stdout
    with tarfile.open(fileobj=BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    package = into / ALIAS
    (into / "src" / "willitscale").rename(package)
    name = re.compile(r"(?<![\w/-])willitscale(?=[.\s])")
    for path in package.rglob("*.py"):
        path.write_text(name.sub(ALIAS, path.read_text(encoding="utf-8")), encoding="utf-8")
    sys.path.insert(0, str(into))
    return importlib.import_module(ALIAS)


def _modules(prefix: str):
    build = importlib.import_module(f"{prefix}.scenario.build")
    est = importlib.import_module(f"{prefix}.estimation.estimate")
    engine = importlib.import_module(f"{prefix}.step.engine")
    evaluate = importlib.import_module(f"{prefix}.step.evaluate")
    batch = importlib.import_module(f"{prefix}.scenario.batch")
    fit = importlib.import_module(f"{prefix}.estimation.fit")
    return build, est, engine, evaluate, batch, fit


def _calls(prefix: str, settings: dict, fresh_scenarios: int):
    """``estimate()``, the engine on a made context, a fresh context + engine, and
    ``estimate()`` of a scenario object not seen before (built beforehand), as thunks."""
    build, est, engine, evaluate, batch, fit = _modules(prefix)
    scenario = build.build_scenario(settings)
    unseen = iter([build.build_scenario(settings) for _ in range(fresh_scenarios)])
    fitted, _ = fit.fit_scenario(scenario)
    ctx = engine.make_context(fitted)
    one = batch.PlanBatch.from_plans([fitted.plan])
    fresh = getattr(engine, "new_context", engine.make_context)  # today's make_context keeps it
    return (lambda: est.estimate(scenario),
            lambda: evaluate.run(ctx, one, detail=True),
            lambda: evaluate.run(fresh(fitted), one, detail=True),
            lambda: est.estimate(next(unseen)))


def interleaved_medians(old, new, repeat: int) -> tuple[float, float]:
    """Median seconds per call of ``old`` and ``new``, calls alternating (each warmed once)."""
    old(), new()
    times = ([], [])
    for _ in range(repeat):
        for fn, out in ((old, times[0]), (new, times[1])):
            start = time.perf_counter()
            fn()
            out.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


def first_call(prefix: str, settings: dict, path: str) -> float:
    """Seconds of the first ``estimate()`` in a fresh process (the package ``prefix`` imported
    from ``path`` or the installed one, the scenario built before the clock starts)."""
    code = (f"import sys, time, importlib\nsys.path.insert(0, {path!r})\n"
            f"build = importlib.import_module('{prefix}.scenario.build')\n"
            f"est = importlib.import_module('{prefix}.estimation.estimate')\n"
            f"sc = build.build_scenario({settings!r})\n"
            "t = time.perf_counter(); est.estimate(sc); print(time.perf_counter() - t)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def first_call_medians(settings: dict, path: str, calls: int) -> tuple[float, float]:
    """Median :func:`first_call` of the previous and today's package, processes interleaved."""
    times = ([], [])
    for _ in range(calls):
        times[0].append(first_call(ALIAS, settings, path))
        times[1].append(first_call("willitscale", settings, path))
    return statistics.median(times[0]), statistics.median(times[1])


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    long_flag(ap)
    ap.add_argument("--previous", default=PREVIOUS, help=f"git revision of the previous engine "
                    f"(default {PREVIOUS})")
    args = ap.parse_args(argv)
    repeat = 200 if args.long else 40
    headlines = []
    with tempfile.TemporaryDirectory() as tmp:
        previous_package(args.previous, Path(tmp))
        rows = []
        for label, settings, goals in (
                ("acceptance scenario", ACCEPTANCE, (10.0, 2.0)),
                ("network-bound DP (2B, 4 nodes, 25 Gb/s)", NETWORK_BOUND, (None, None)),
                ("acceptance, --network flow (fat-tree 4:1)", FLOW, (10.0, None))):
            slow = settings is not ACCEPTANCE
            fresh = (max(5, repeat // 8) if slow else repeat) + 1  # + the warm-up call
            old, new = _calls(ALIAS, settings, fresh), _calls("willitscale", settings, fresh)
            for what, i, goal in (("estimate()", 0, goals[0]), ("engine alone", 1, goals[1]),
                                  ("fresh context + engine", 2, None),
                                  ("estimate(), unseen scenario", 3, None)):
                reps = max(5, repeat // 8) if (i in (0, 3) and slow) else repeat
                t_old, t_new = interleaved_medians(old[i], new[i], reps)
                rows.append((label, what, t_old, t_new))
                headlines.append(Headline(f"{what}, {label}", t_new * 1e3, "ms", at_most=goal))
                headlines.append(Headline(f"{what}, {label}: previous / today", t_old / t_new, "x"))
            if settings is FLOW:
                t_old, t_new = first_call_medians(FLOW, tmp, FIRST_CALLS)
                what = "first estimate() in a process"
                rows.append((label, what, t_old, t_new))
                headlines.append(Headline(f"{what}, {label}", t_new * 1e3, "ms"))
                headlines.append(Headline(f"{what}, {label}: previous / today", t_old / t_new, "x"))
    print(f"previous engine: git {args.previous}; medians of interleaved calls")
    print(f"{'scenario':42} {'what':30} {'previous ms':>12} {'today ms':>10} {'ratio':>7}")
    for label, what, t_old, t_new in rows:
        print(f"{label:42} {what:30} {t_old * 1e3:12.2f} {t_new * 1e3:10.2f} {t_old / t_new:6.1f}x")
    emit(headlines)


if __name__ == "__main__":
    main()
