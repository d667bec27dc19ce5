"""``willitscale results list|show|compare|export|import``: the runs kept in the local results store."""

from __future__ import annotations

import argparse
import sys
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from willitscale.cli.paths import output_file, write_text
from willitscale.cli.plot_flag import add_plot_flag

__all__ = ["register", "busbw_curves"]


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    parser = subparsers.add_parser(
        "results", help="the runs measured so far: list, show, compare repeats, export, import",
        description="What has been measured so far? Every benchmark run is kept (options, "
                    "environment, each row) in a local SQLite store: $WILLITSCALE_HOME/"
                    "results.sqlite, or the platform's user data folder. docs/measure.md.",
        epilog=examples("willitscale results list", "willitscale results show --plot figs",
                        "willitscale results compare", "willitscale results export --format csv "
                        "-o runs.csv", "willitscale results import other/results.sqlite"))
    sub = parser.add_subparsers(dest="results_command", metavar="ACTION", parser_class=type(parser))

    p = sub.add_parser("list", help="every stored run, newest first",
                       description="Which runs are stored? Newest first, with a one-line summary.",
                       epilog=examples("willitscale results list --kind collectives --limit 10"))
    p.add_argument("--kind", choices=("collectives", "matmul", "train", "attention", "bandwidth"))
    p.add_argument("--limit", type=int, default=None)
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_list)

    p = sub.add_parser("show", help="one run: its environment and its rows",
                       description="What did one run measure, and on what? Its environment "
                                   "(hosts, devices, NICs, versions) and its rows; --plot draws a "
                                   "collectives run's busbw against message size, measured and "
                                   "predicted.",
                       epilog=examples("willitscale results show", "willitscale results show 3 "
                                       "--plot figs"))
    p.add_argument("run_id", type=int, nargs="?", help="default: the latest run")
    p.add_argument("--json", action="store_true")
    add_plot_flag(p)
    p.set_defaults(run=run_show)

    p = sub.add_parser("compare", help="repeated runs of one setup: median/min/max, deviating runs",
                       description="Is the network steady? Repeated runs of one setup point by "
                                   "point (median, min, max, spread) and, run by run, how far "
                                   "each is from the median; runs beyond --threshold are flagged.",
                       epilog=examples("willitscale results compare",
                                       "willitscale results compare 3 5 9 --threshold 0.05"))
    p.add_argument("run_ids", type=int, nargs="*", help="default: every run of the latest run's setup")
    p.add_argument("--threshold", type=float, default=0.10,
                   help="flag runs whose median deviation exceeds this fraction (default 0.10)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_compare)

    p = sub.add_parser("export", help="rows of runs as CSV or JSON",
                       description="The rows of stored runs as CSV or JSON, one record per row "
                                   "with its run id, kind, start time and label, then the run's "
                                   "status, host and pid, and (on each run's first row) its "
                                   "options and environment: `results import` reads it back.",
                       epilog=examples("willitscale results export -o runs.csv",
                                       "willitscale results export 3 4 --format json"))
    p.add_argument("run_ids", type=int, nargs="*", help="default: every run")
    p.add_argument("--format", choices=("csv", "json"), default="csv")
    p.add_argument("-o", "--output", default=None, type=output_file("--output"), help="file to write (default: stdout)")
    p.set_defaults(run=run_export)

    p = sub.add_parser("import", help="copy the runs of other stores or exports into this one",
                       description="Gather runs measured elsewhere (another machine, or one "
                                   "WILLITSCALE_HOME per job on a filesystem without working "
                                   "locks) into this store: every finished run with its rows, "
                                   "environment and times, under new ids. Runs already here are "
                                   "skipped, so importing twice is harmless. A `results export` "
                                   "file (.csv or .json) is read record by record: a bad record "
                                   "is reported with its file and line, the rest are imported "
                                   "(exit status 1 says some were not). Calibrations are not "
                                   "copied (fit again: `willitscale calibrate`).",
                       epilog=examples("willitscale results import /scratch/job-1234/results.sqlite",
                                       "willitscale results import runs/*/",
                                       "willitscale results import runs.csv"))
    p.add_argument("stores", nargs="+", metavar="STORE",
                   help="a results.sqlite file, a folder holding one (a WILLITSCALE_HOME), or "
                        "a file written by `results export` (.csv, .json)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_import)

    p = sub.add_parser("salvage", help="copy what a damaged store still holds into a new one",
                       description="Get back the runs a damaged results store still holds. "
                                   "Without STORE: the store in use is moved aside (kept as "
                                   "results.damaged-TIME.sqlite) and every readable run, row and "
                                   "calibration is copied into a fresh store. With STORE (another "
                                   "damaged file): its readable runs are copied into the store in "
                                   "use. Run it while no benchmark is writing.",
                       epilog=examples("willitscale results salvage",
                                       "willitscale results salvage old/results.sqlite"))
    p.add_argument("store", nargs="?", metavar="STORE", default=None,
                   help="a damaged results.sqlite (default: the store in use)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run_salvage)

    from willitscale.cli import nccl_tests

    nccl_tests.register(sub)


def _store():
    from willitscale.results.store import Store

    return Store()


def _summary(info, rows) -> str:
    try:
        return _summary_of(info, rows)
    except (KeyError, TypeError, ValueError):  # rows of an odd shape (salvaged, hand-made)
        return "(rows without the usual fields: see `results show`)"


def _summary_of(info, rows) -> str:
    if not rows:
        return ""
    if info.kind == "collectives":
        ops = sorted({r["op"] for r in rows})
        peak = max(r["busbw_GBps"] for r in rows)
        wrong = sum(r["wrong"] for r in rows)  # rows not checked (nccl-tests -c 0) count 0
        return f"{','.join(ops)}: peak busbw {peak:.3g} GB/s" + (f", {wrong} WRONG" if wrong else "")
    if info.kind == "matmul":
        return f"peak {max(r['achieved_TFLOPS'] for r in rows):.3g} TFLOP/s"
    if info.kind == "attention":
        rates = [r["achieved_TFLOPS"] for r in rows if r.get("achieved_TFLOPS")]
        return f"peak {max(rates):.3g} TFLOP/s" if rates else "no backend ran"
    if info.kind == "bandwidth":
        return f"peak {max(r['achieved_GBps'] for r in rows):.4g} GB/s"
    r = rows[-1]
    return f"{r['model']}: step {r['step_s'] * 1e3:.1f} ms, exposed comm {r['exposed_comm_s'] * 1e3:.1f} ms"


def run_list(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json, print_table

    with _store() as store:
        infos = store.runs(kind=args.kind, limit=args.limit)
        stored = [store.run(i.id) for i in infos]
    if args.json:
        print_json([{**{k: v for k, v in s.info.to_json().items() if k != "environment"},
                     "world_size": s.info.environment.get("world_size"),
                     "nodes": s.info.environment.get("nodes"),
                     "backend": s.info.environment.get("backend"),
                     "summary": _summary(s.info, s.rows)} for s in stored])
        return 0
    rows = [[s.info.id, s.info.started_at.replace("+00:00", "Z"), s.info.kind, s.info.status,
             s.info.environment.get("world_size"), s.info.environment.get("nodes"),
             s.info.environment.get("backend"), s.info.rows, _summary(s.info, s.rows), s.info.label]
            for s in stored]
    print_table("stored runs", ["id", "started (UTC)", "kind", "status", "ranks", "nodes",
                                "backend", "rows", "summary", "label"], rows)
    return 0


def _nic_text(nic: dict[str, Any]) -> str:
    """``eth0 25000Mb/s``, plus the shaped rate when a tbf qdisc limits it."""
    text = nic["name"] + (f" {nic['speed_Mbps']}Mb/s" if nic.get("speed_Mbps") else "")
    words = (nic.get("qdisc") or "").split()
    if "tbf" in words and "rate" in words:
        text += f" (tbf {words[words.index('rate') + 1]})"
    return text


def _environment_lines(env: dict[str, Any]) -> list[str]:
    lines = [f"{env.get('world_size')} ranks on {env.get('nodes')} node(s) "
             f"({env.get('ranks_per_node')} per node), backend {env.get('backend')}",
             f"devices: {', '.join(env.get('devices') or []) or '?'}"]
    imported = env.get("imported")
    if imported:  # read from a file (nccl-tests, a profiler trace): the file, not this host
        lines.append(f"imported from {imported.get('file')} ({imported.get('format')}"
                     + (f", NCCL {env['nccl']}" if env.get("nccl") else "") + ")")
        return lines + [f"  {host.get('node')}: {len(host.get('gpus') or [])} device(s)"
                        for host in env.get("hosts") or []]
    lines.append(f"torch {env.get('torch')}, CUDA {env.get('cuda')}, NCCL {env.get('nccl')}, "
                 f"driver {env.get('driver')}")
    if env.get("emulated"):
        e = env["emulated"]
        lines.append(f"emulated cluster: {e.get('nodes')} nodes x {e.get('ranks_per_node')} ranks, "
                     f"uplink {e.get('uplink')}")
    for host in env.get("hosts") or []:
        nics = [_nic_text(i) for i in host.get("interfaces") or [] if i.get("name") != "lo"]
        lines.append(f"  {host.get('node')}: {host.get('cpu')} x{host.get('cpus')}, "
                     f"NUMA nodes {len(host.get('numa') or [])}, GPU links {host.get('gpu_links')}, "
                     f"NICs {', '.join(nics) or '-'}")
    return lines


def run_show(args: argparse.Namespace) -> int:
    from willitscale.cli.bench import table_of
    from willitscale.cli.output import print_json, print_table

    with _store() as store:
        run_id = args.run_id if args.run_id is not None else store.latest_run_id()
        if args.plot and args.run_id is None and store.run(run_id).info.kind != "collectives":
            # the plot is of a collective sweep: with no id, the newest one (said on stderr)
            sweeps = store.runs(kind="collectives")
            if sweeps:
                print(f"note: --plot draws the newest collectives run, {sweeps[0].id} (the latest "
                      f"run, {run_id}, is not a sweep)", file=sys.stderr)
                run_id = sweeps[0].id
        run = store.run(run_id)
    if args.plot:
        _plot_run(args.plot, run)
    if args.json:
        print_json(run)
        return 0
    info = run.info
    print(f"run {info.id}: {info.kind}, {info.status}, started {info.started_at}, "
          f"{info.rows} rows" + (f", label {info.label!r}" if info.label else ""))
    if info.reason:
        print(f"{info.status}: {info.reason}")
    for line in _environment_lines(dict(info.environment)):
        print(line)
    title, columns, units, rows = table_of(info.kind, [dict(r) for r in run.rows])
    print_table(title, columns, rows, units=units)
    return 0


def busbw_curves(rows, time_key: str = "time_us", scale: float = 1e-6) -> dict:
    """``{"all_reduce (out-of-place)": (sizes, busbw in bytes/s)}`` from collective rows."""
    from willitscale.collectives.metrics import busbw

    curves: dict[str, tuple[list, list]] = {}
    for r in rows:
        where = f"{r['ranks']} ranks" + (f" on {r['nodes']} nodes" if r.get("nodes") else "")
        label = f"{r['op']} ({'in-place' if r['in_place'] else 'out-of-place'}, {where})"
        sizes, bws = curves.setdefault(label, ([], []))
        sizes.append(r["size_bytes"])
        bws.append(float(busbw(r["op"], r["size_bytes"], r[time_key] * scale, r["ranks"])))
    return curves


def _plot_run(directory: str, run) -> None:
    from willitscale.cli.plot_flag import collective_plots
    from willitscale.errors import ConfigError

    if run.info.kind != "collectives":
        raise ConfigError("--plot", directory, f"a collectives run to draw (run {run.info.id} is "
                          f"{run.info.kind}; `willitscale results list` shows the sweeps)")
    collective_plots(directory, dict(run.info.environment), [dict(r) for r in run.rows],
                     run_id=run.info.id, name=f"busbw-run{run.info.id}")


def _key_text(kind: str, key: tuple) -> str:
    if kind == "collectives":
        op, dtype, redop, in_place, size = key
        return f"{op} {size:,} B {dtype}" + (" in-place" if in_place else "")
    if kind == "matmul":
        return f"{key[0]} {key[1]}x{key[2]}x{key[3]}"
    if kind in ("attention", "bandwidth"):
        return " ".join(str(k) for k in key)
    return f"{key[0]} seq {key[1]} batch {key[2]}"


def run_compare(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.errors import ConfigError
    from willitscale.results.repeats import compare_runs, metric_of, setup_signature

    with _store() as store:
        if args.run_ids:
            runs = [store.run(i) for i in args.run_ids]
        else:
            latest = store.run(store.latest_run_id())
            sig = setup_signature(latest.info.kind, latest.info.environment)
            runs = [store.run(i.id) for i in store.runs(kind=latest.info.kind)
                    if setup_signature(i.kind, i.environment) == sig]
    kinds = {r.info.kind for r in runs}
    if len(kinds) != 1:
        raise ConfigError("run_ids", args.run_ids, "runs of one benchmark kind")
    kind = kinds.pop()
    points, deviations = compare_runs(kind, [(r.info.id, r.info.started_at, r.rows) for r in runs],
                                      threshold=args.threshold)
    metric, _, _ = metric_of(kind)
    if args.json:
        print_json({"kind": kind, "metric": metric, "threshold": args.threshold,
                    "points": [{"point": _key_text(kind, p.key), "runs": p.runs, "median": p.median,
                                "min": p.min, "max": p.max, "spread": p.spread} for p in points],
                    "runs": [{"run_id": d.run_id, "started_at": d.started_at,
                              "deviation": d.deviation, "flagged": d.flagged} for d in deviations]})
        return 0
    print_table(f"{kind}: {metric} over {len(runs)} runs", ["point", "runs", "median", "min", "max",
                                                             "spread"],
                [[_key_text(kind, p.key), p.runs, f"{p.median:.4g}", f"{p.min:.4g}", f"{p.max:.4g}",
                  f"{p.spread:.1%}"] for p in points])
    print_table("runs over time", ["run", "started (UTC)", "vs median", "flag"],
                [[d.run_id, d.started_at, f"{d.deviation:+.1%}", "DEVIATES" if d.flagged else ""]
                 for d in deviations],
                caption=f"flagged: median deviation beyond {args.threshold:.0%}")
    return 0


def run_export(args: argparse.Namespace) -> int:
    from willitscale.results.exchange import csv_text, export_records, json_text

    with _store() as store:
        ids = args.run_ids or [i.id for i in reversed(store.runs())]
        runs = [store.run(i) for i in ids]
    records = export_records(runs)
    text = (json_text if args.format == "json" else csv_text)(records)
    if args.output:
        write_text(args.output, text)
        print(f"wrote {len(records)} rows to {args.output}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


EXPORT_SUFFIXES = (".csv", ".json")


def _source_store_path(text: str) -> Path:
    from willitscale.errors import ConfigError

    path = Path(text).expanduser()
    if path.is_dir():
        path = path / "results.sqlite"
    if not path.is_file():
        raise ConfigError("STORE", text, "an existing results.sqlite file, a folder holding "
                                         "one (a WILLITSCALE_HOME), or a `results export` file "
                                         "(.csv, .json)")
    return path


@contextmanager
def _source_store(path: Path):
    """The store at ``path`` to read from, left as it is: one of an older schema version is
    migrated in a temporary copy (opening it in place would migrate the other store)."""
    import sqlite3
    import tempfile

    from willitscale.results.schema import (
        SCHEMA_VERSION,
        create_or_upgrade,
        stored_version,
    )
    from willitscale.results.store import Store

    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            old = (stored_version(db) or SCHEMA_VERSION) < SCHEMA_VERSION
        finally:
            db.close()
    except sqlite3.Error:  # damaged, or not readable so: the store says what is wrong
        old = False
    if not old:
        with Store(path) as source:
            yield source
        return
    with tempfile.TemporaryDirectory(prefix="willitscale-import-") as folder:
        copy = Path(folder) / "results.sqlite"
        src, dst = sqlite3.connect(f"file:{path}?mode=ro", uri=True), sqlite3.connect(copy)
        try:
            src.backup(dst)
            dst.isolation_level = None
            dst.execute("BEGIN IMMEDIATE")
            create_or_upgrade(dst)
            dst.execute("COMMIT")
        finally:
            src.close()
            dst.close()
        with Store(copy) as source:
            source.path = path  # named as the user gave it (messages, "another store" check)
            yield source


def _import_one(store, path: Path) -> tuple[list, list]:
    """``(records, problems)`` of importing one store or export file into ``store``."""
    if path.suffix.lower() in EXPORT_SUFFIXES:
        from willitscale.results.exchange import read_export

        exported = read_export(path)
        done = store.import_stored(list(exported.runs), still_running=list(exported.still_running))
        problems = list(exported.problems)
    else:
        with _source_store(path) as source:
            done, problems = store.import_runs(source), []
    return ([{"store": str(path), "source_id": old, "id": new, "skipped": why or None}
             for old, new, why in done], problems)


def run_import(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json, print_table

    sources = [_source_store_path(text) for text in args.stores]  # all checked before any copy
    records, problems = [], []
    with _store() as store:
        for path in sources:
            done, bad = _import_one(store, path)
            records += done
            problems += bad
    if args.json:
        print_json(records)
    else:
        print_table("imported runs", ["store", "run there", "run here", ""],
                    [[r["store"], r["source_id"], r["id"] if r["id"] is not None else "-",
                      r["skipped"] or "imported"] for r in records])
    for problem in problems:
        print(f"not imported: {problem}", file=sys.stderr)
    done = sum(r["id"] is not None for r in records)
    print(f"{done} run(s) imported, {len(records) - done} skipped"
          + (f"; {len(problems)} record(s) not imported (listed above)" if problems else ""),
          file=sys.stderr)
    return 1 if problems else 0


def _move_aside(path: Path) -> Path:
    """Rename the store (and its -wal/-shm/-journal) to ``results.damaged-TIME.sqlite``."""
    from willitscale.results.store import now_iso

    stamp = now_iso().replace("-", "").replace(":", "").replace("+0000", "")[:15]
    target = path.with_name(f"{path.stem}.damaged-{stamp}{path.suffix}")
    for suffix in ("-wal", "-shm", "-journal"):
        side = Path(f"{path}{suffix}")
        if side.exists():
            side.rename(f"{target}{suffix}")
    path.rename(target)
    return target


def run_salvage(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.results.home import store_path
    from willitscale.results.salvage import salvage

    ours = store_path()
    if args.store is None:
        if not ours.is_file():
            from willitscale.errors import ConfigError

            raise ConfigError("STORE", str(ours), "a results store to salvage (there is none "
                                                  "at this path)")
        source = _move_aside(ours)
        print(f"moved the damaged store aside: {source}", file=sys.stderr)
    else:
        source = _source_store_path(args.store)
    found = salvage(source)
    with _store() as store:
        done = store.import_stored(list(found.runs))
        new_ids = {old: new for old, new, _ in done if new is not None}
        for created, path, runs, toml in found.calibrations:
            store.add_calibration(path=path, runs=tuple(new_ids.get(r, r) for r in runs),
                                  toml=toml, created_at=created)
        target = store.path
    report = {"from": str(source), "into": str(target), "runs": [
        {"source_id": old, "id": new, "rows": next(r.info.rows for r in found.runs
                                                    if r.info.id == old), "skipped": why or None}
        for old, new, why in done], "lost_runs": found.lost_runs, "lost_rows": found.lost_rows,
        "calibrations": len(found.calibrations)}
    if args.json:
        print_json(report)
        return 0
    print_table(f"salvaged from {source} into {target}", ["run there", "run here", "rows", ""],
                [[r["source_id"], r["id"] if r["id"] is not None else "-", r["rows"],
                  r["skipped"] or "copied"] for r in report["runs"]])
    print(f"{sum(r['id'] is not None for r in report['runs'])} run(s) and "
          f"{len(found.calibrations)} calibration(s) copied; unreadable: {found.lost_runs} "
          f"run(s), {found.lost_rows} row(s)", file=sys.stderr)
    return 0
