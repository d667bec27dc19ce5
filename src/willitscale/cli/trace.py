"""``willitscale trace import TRACE.json...``: a PyTorch profiler (Kineto) trace of a training
step into what it did (compute by kind, collectives, overlap, steps) and into the results store,
its collectives as collective runs that ``calibrate`` fits like any other."""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from pathlib import Path

__all__ = ["register"]

HELP = "a PyTorch profiler trace of a training step: compute by kind, collectives, overlap"

DESCRIPTION = """\
Read the Chrome trace JSON that torch.profiler exports (prof.export_chrome_trace, or
tensorboard_trace_handler's .pt.trace.json): per step (the ProfilerStep#N marks of a profiler
schedule), the compute time by kind (GEMM, attention, elementwise, optimizer: each event's own
time, nested events subtracted), the collectives (NCCL kernels with their communication
arguments, Gloo's gloo:<op> events: op, size, dtype, group size, duration), how much of the
communication ran under compute and how much was exposed.

The collectives with a known size are stored as collective runs (one per group size), so
`willitscale calibrate` fits link latency and bandwidth from them as from `bench collectives`:
they are times of collectives inside a real step, sharing the machine with compute. Record CPU
traces with record_shapes=True, or Gloo's events carry no sizes. A file imported before (same
content) is not stored again. docs/formats.md describes what is read."""


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser("trace", help=HELP, description=DESCRIPTION, epilog=examples(
        "willitscale trace import rank0.json"))
    sub = p.add_subparsers(dest="action", metavar="ACTION", parser_class=type(p))
    imp = sub.add_parser("import", help="read traces, print what the steps did, store collectives",
                         description=DESCRIPTION, epilog=examples(
                             "willitscale trace import rank0.json",
                             "willitscale trace import rank0.json --nodes 2 --json",
                             "willitscale trace import rank0.json --no-store"))
    imp.add_argument("traces", nargs="+", metavar="TRACE", help="Chrome trace JSON of torch.profiler")
    imp.add_argument("--ranks", type=int, default=None,
                     help="group size where the trace records none (default: its world size)")
    imp.add_argument("--nodes", type=int, default=1,
                     help="nodes the job ran on (a trace names one host; default 1)")
    imp.add_argument("--label", default="", help="a note stored with each run")
    imp.add_argument("--no-store", action="store_true", help="print only; store nothing")
    imp.add_argument("--json", action="store_true")
    imp.set_defaults(run=run)
    from willitscale.cli.scenario_flags import add_scenario_flags

    cmp = sub.add_parser(
        "compare", help="a trace's steps beside willitscale's prediction for the same job",
        description="The traced steps' mean time, compute, optimizer, communication and exposed "
                    "communication beside what `willitscale estimate` predicts for the job the "
                    "flags (or a scenario file) describe: the same model, cluster and plan the "
                    "trace ran. Measured compute is the trace's GEMM + attention + elementwise "
                    "time; predicted compute is forward + backward.",
        epilog=examples("willitscale trace compare rank0.json --model llama3-8b --preset dgx-h100 "
                        "--nodes 2 --micro-batch 1 --seq-len 8192"))
    cmp.add_argument("trace", metavar="TRACE", help="Chrome trace JSON of torch.profiler")
    add_scenario_flags(cmp)
    cmp.add_argument("--json", action="store_true")
    cmp.set_defaults(run=run_compare)


def _load(path: Path):
    from willitscale.errors import ConfigError

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError("TRACE", str(path), f"a readable trace file ({exc.strerror})") from None
    digest = hashlib.sha256(data).hexdigest()
    if data[:2] == b"\x1f\x8b":  # gzip: tensorboard_trace_handler(use_gzip=True) writes .json.gz
        import gzip

        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise ConfigError("TRACE", str(path), f"a whole gzip file ({exc})") from None
    try:
        return json.loads(data), digest
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ConfigError("TRACE", str(path), f"JSON (torch.profiler's Chrome trace): {exc}") from None


def _rows(summary, ranks: int):
    from willitscale.collectives.ops import Op
    from willitscale.results.records import CollectiveRow

    reducing = {Op.ALL_REDUCE, Op.REDUCE, Op.REDUCE_SCATTER}
    return [CollectiveRow(op=c.op, size_bytes=c.size_bytes, count=c.count, dtype=c.dtype,
                          redop="sum" if c.op in reducing else "none",
                          root=0 if c.op in (Op.BROADCAST, Op.REDUCE) else -1, in_place=True,
                          ranks=ranks, time=c.duration, wrong=0, checked=False)
            for c in summary.collectives if c.size_bytes and c.ranks == ranks]


def _store(store, summary, path: Path, digest: str, args, now: str) -> list[dict]:
    """One collectives run per group size; returns what was stored or skipped."""
    out = []
    sizes = sorted({c.ranks for c in summary.collectives if c.size_bytes and c.ranks})
    for ranks in sizes:
        source = f"torch.profiler trace {path.name} sha256:{digest} group size {ranks}"
        known = store.run_from_source(source)
        if known is not None:
            out.append({"ranks": ranks, "run": None, "skipped": f"already imported as run {known}"})
            continue
        if ranks % args.nodes:
            out.append({"ranks": ranks, "run": None,
                        "skipped": f"{ranks} ranks do not spread evenly over --nodes {args.nodes}"})
            continue
        rows = _rows(summary, ranks)
        env = {"world_size": ranks, "nodes": args.nodes, "ranks_per_node": ranks // args.nodes,
               "backend": summary.backend, "devices": list(summary.devices) or ["cpu"],
               "emulated": None, "hosts": [{"node": summary.host, "hostname": summary.host}],
               "imported": {"format": "torch.profiler chrome trace", "file": str(path),
                            "sha256": digest, "rank": summary.rank}}
        options = {"ops": sorted({r.op.value for r in rows}),
                   "trace": {"steps": [s.to_json() for s in summary.steps]}}
        run_id = store.add_run(kind="collectives", started_at=now, finished_at=now,
                               status="complete", label=args.label, options=options,
                               environment=env, host=summary.host, pid=0, source=source,
                               rows=[(i, r.to_json()) for i, r in enumerate(rows)])
        out.append({"ranks": ranks, "run": run_id, "rows": len(rows), "skipped": None})
    return out


def _print(summary, stored: list[dict]) -> None:
    from willitscale.cli.output import print_table
    from willitscale.results.importers.kineto import KINDS
    from willitscale.units import format_size, format_time

    print_table(f"{summary.file}: {len(summary.steps)} step(s)",
                ["step", "time", *KINDS, "comms", "overlapped", "exposed"],
                [[s.name, format_time(s.duration), *(format_time(s.compute[k]) for k in KINDS),
                  format_time(s.comms), format_time(s.overlap), format_time(s.exposed_comms)]
                 for s in summary.steps])
    print_table("collectives", ["step", "op", "size", "type", "ranks", "time"],
                [[c.step if c.step is not None else "-", c.op.value,
                  format_size(c.size_bytes) if c.size_bytes else "?", c.dtype or "?",
                  c.ranks or "?", format_time(c.duration)] for c in summary.collectives])
    for s in stored:
        said = f"stored as run {s['run']} ({s['rows']} rows)" if s["run"] else s["skipped"]
        print(f"group of {s['ranks']} ranks: {said}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json
    from willitscale.errors import ConfigError
    from willitscale.results.importers.kineto import read_trace
    from willitscale.results.store import Store, now_iso

    if getattr(args, "action", None) is None:
        raise ConfigError("trace ACTION", None, "import")
    for name, value in (("--ranks", args.ranks), ("--nodes", args.nodes)):
        if value is not None and value < 1:
            raise ConfigError(name, value, "a count >= 1")
    paths = [Path(p).expanduser() for p in args.traces]
    loaded = [(path, *_load(path)) for path in paths]  # every file read before anything is stored
    summaries = [(path, read_trace(data, str(path), ranks=args.ranks), digest)
                 for path, data, digest in loaded]
    now, records, problems = now_iso(), [], []
    store = None if args.no_store else Store()
    try:
        for path, summary, digest in summaries:
            stored = [] if store is None else _store(store, summary, path, digest, args, now)
            problems += summary.problems
            records.append((summary, stored))
    finally:
        if store is not None:
            store.close()
    if args.json:
        print_json({"traces": [_json(s, stored) for s, stored in records],
                    "problems": [str(p) for p in problems]})
    else:
        for summary, stored in records:
            _print(summary, stored)
    for problem in problems:
        print(f"note: {problem}", file=sys.stderr)
    return 0


def _json(summary, stored: list[dict]) -> dict:
    return {"file": summary.file, "backend": summary.backend, "rank": summary.rank,
            "world_size": summary.world_size, "devices": list(summary.devices),
            "steps": [s.to_json() for s in summary.steps],
            "collectives": [{"op": c.op.value, "size_bytes": c.size_bytes, "count": c.count,
                             "type": c.dtype, "ranks": c.ranks, "group": c.group, "step": c.step,
                             "start_s": c.start, "time_s": c.duration, "name": c.name}
                            for c in summary.collectives],
            "stored": stored}


#: (row, the estimate's value, the measured step's value) of `trace compare`
def comparison(estimate, steps) -> list[tuple[str, float, float]]:
    """Predicted and measured seconds per step (the measured ones: means over ``steps``)."""
    n = len(steps)
    mean = lambda f: sum(f(s) for s in steps) / n  # noqa: E731
    computed = ("gemm", "attention", "elementwise")
    b = estimate.breakdown
    return [("step", estimate.step_time, mean(lambda s: s.duration)),
            ("compute (forward + backward)", b.forward + b.backward,
             mean(lambda s: sum(s.compute[k] for k in computed))),
            ("optimizer", b.optimizer, mean(lambda s: s.compute["optimizer"])),
            ("communication (busy)", estimate.comms, mean(lambda s: s.comms)),
            ("exposed communication", estimate.exposed_comms, mean(lambda s: s.exposed_comms))]


def run_compare(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.cli.scenario_flags import settings_from_args
    from willitscale.estimation.estimate import estimate
    from willitscale.results.importers.kineto import read_trace
    from willitscale.scenario.build import build_scenario
    from willitscale.units import format_time

    path = Path(args.trace).expanduser()
    data, _ = _load(path)
    summary = read_trace(data, str(path))
    predicted = estimate(build_scenario(settings_from_args(args)), allow_oom=True)
    rows = comparison(predicted, summary.steps)
    if args.json:
        print_json({"trace": str(path), "steps": len(summary.steps),
                    "rows": [{"what": w, "predicted_s": p, "measured_s": m,
                              "error": (p - m) / m if m else None} for w, p, m in rows]})
    else:
        print_table(f"{path}: {len(summary.steps)} step(s), means per step",
                    ["", "predicted", "measured", "error"],
                    [[w, format_time(p), format_time(m), f"{(p - m) / m:+.1%}" if m else "-"]
                     for w, p, m in rows])
    return 0
