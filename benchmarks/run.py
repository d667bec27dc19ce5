"""Run every benchmark, each in its own process, and summarise their headline figures and goals.

    .venv/bin/python benchmarks/run.py            # all of them, a few minutes on 2 cores (fabric_step times the old solver)
    .venv/bin/python benchmarks/run.py --long     # the long versions (several minutes)
    .venv/bin/python benchmarks/run.py planner_speed fabric_scaling --verbose

Every ``benchmarks/*.py`` except this runner and helpers starting with ``_`` is a benchmark; each
runs as ``python benchmarks/NAME.py [--long]`` in a fresh interpreter (no warm caches or imports
carried from one to the next), prints its own tables (shown with ``--verbose``) and hands its
headline figures back through the file ``WILLITSCALE_BENCH_HEADLINES`` names. The goals
(planner >= 100,000 plans/s; the fabric simulator under 2 s at 1,024 GPUs and 30 s at 8,192)
live beside the measurements in the scripts. Ratios (batched vs looped) are measured within one
run of one script, so a slower or busier machine moves both sides.

Exit status: 0 when every benchmark ran and met its goals, 1 when a goal was missed, 2 when a
benchmark failed or timed out.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _headlines import HEADLINES_ENV, Headline  # noqa: E402

#: seconds one benchmark may take before it is stopped (the long versions get ten times this);
#: fabric_step's reference solver alone takes 1-3 minutes on a busy 2-core machine
TIMEOUT = 600


def benchmarks() -> list[str]:
    """Names of the benchmark scripts, in alphabetical order."""
    return sorted(p.stem for p in HERE.glob("*.py") if p.name != "run.py" and not p.name.startswith("_"))


def run_one(name: str, *, long: bool, verbose: bool) -> tuple[list[Headline], float, str]:
    """Run ``benchmarks/NAME.py``; ``(headlines, seconds, error or "")``."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "headlines.json"
        env = {**os.environ, HEADLINES_ENV: str(out)}
        argv = [sys.executable, str(HERE / f"{name}.py"), *(["--long"] if long else [])]
        start = time.perf_counter()
        try:
            proc = subprocess.run(argv, env=env, capture_output=True, text=True,
                                  timeout=TIMEOUT * (10 if long else 1))
        except subprocess.TimeoutExpired:
            return [], time.perf_counter() - start, f"timed out after {TIMEOUT * (10 if long else 1)} s"
        seconds = time.perf_counter() - start
        if verbose:
            sys.stdout.write("".join(f"    {line}\n" for line in proc.stdout.splitlines()))
        if proc.returncode != 0:
            tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
            return [], seconds, f"exit status {proc.returncode}:\n{tail}"
        if not out.exists():
            return [], seconds, "reported no headline figures (it should call _headlines.emit)"
        fields = Headline.__dataclass_fields__
        return ([Headline(**{k: v for k, v in h.items() if k in fields})
                 for h in json.loads(out.read_text())], seconds, "")


def summary(results: dict) -> None:
    """One table: every headline figure, its goal and whether it was met, and each script's time."""
    from willitscale.cli.output import print_table

    rows = []
    for name, (headlines, seconds, error) in results.items():
        script = f"{name} ({seconds:.1f} s)"
        if error:
            rows.append(["FAILED: " + error.splitlines()[0], "", "", script])
        for i, h in enumerate(headlines):
            status = {True: "met", False: "MISSED", None: ""}[h.met]
            rows.append([h.name, h.value_text(), f"{h.goal} ({status})" if h.goal else "",
                         script if i == 0 and not error else ""])
    print_table("Benchmarks", ["figure", "value", "goal", "script"], rows)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("names", nargs="*", metavar="NAME", help="benchmarks to run (default: all): "
                    + ", ".join(benchmarks()))
    ap.add_argument("--long", action="store_true", help="the long versions (larger, more repeats)")
    ap.add_argument("--verbose", "-v", action="store_true", help="show each script's own output")
    ap.add_argument("--json", action="store_true", help="print every headline figure as JSON")
    args = ap.parse_args(argv)
    names = args.names or benchmarks()
    unknown = sorted(set(names) - set(benchmarks()))
    if unknown:
        ap.error(f"no benchmark {', '.join(unknown)}; there are {', '.join(benchmarks())}")
    results = {}
    for name in names:
        if not args.json:
            print(f"{name}{' --long' if args.long else ''} ...", flush=True)
        headlines, seconds, error = results[name] = run_one(name, long=args.long,
                                                            verbose=args.verbose and not args.json)
        if args.json:
            continue
        for h in headlines:
            print(f"  {h.text()}")
        if error:
            print(f"  FAILED: {error}")
        print(f"  ({seconds:.1f} s)", flush=True)
    if args.json:
        json.dump({n: {"seconds": s, "error": e or None,
                       "headlines": [{"name": h.name, "value": h.value, "unit": h.unit,
                                      "goal": h.goal or None, "met": h.met} for h in hs]}
                   for n, (hs, s, e) in results.items()}, sys.stdout, indent=2)
        print()
    else:
        print()
        summary(results)
    if any(e for _, _, e in results.values()):
        return 2
    return 1 if any(h.met is False for hs, _, _ in results.values() for h in hs) else 0


if __name__ == "__main__":
    sys.exit(main())
