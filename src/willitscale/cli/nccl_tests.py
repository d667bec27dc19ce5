"""``willitscale results import-nccl-tests LOG...``: nccl-tests output (text or ``-J`` JSON) into
the results store as collective runs, so ``calibrate``, ``validate`` and ``results compare``
work on logs measured without willitscale."""

from __future__ import annotations

import argparse
import hashlib
import sys
from pathlib import Path

__all__ = ["register"]


def register(sub) -> None:
    """Add ``import-nccl-tests`` to ``willitscale results``' actions."""
    from willitscale.cli.helptext import examples

    p = sub.add_parser(
        "import-nccl-tests", help="nccl-tests logs (text or -J JSON) as collective runs",
        description="Store what nccl-tests measured (all_reduce_perf, all_gather_perf, ... : "
                    "its printed text, with NCCL_DEBUG lines and launcher prefixes mixed in, or "
                    "the JSON its -J option writes) as collective runs: op, sizes, ranks and "
                    "nodes (from the '#  Rank' lines), time, algbw, busbw, #wrong, out-of-place "
                    "and in-place. Then `willitscale calibrate`, `validate` and `results "
                    "compare` work on them. A line that looks like a table row but is not one "
                    "is reported as FILE:LINE with what was expected, and every other row is "
                    "kept (exit status 1 says something was left out). A file imported before "
                    "(same content) is skipped. docs/formats.md.",
        epilog=examples("willitscale results import-nccl-tests all_reduce.log",
                        "willitscale results import-nccl-tests run.json --label 'cluster A'",
                        "willitscale results import-nccl-tests excerpt.txt --op all_reduce "
                        "--ranks 16 --nodes 2"))
    p.add_argument("logs", nargs="+", metavar="LOG", help="nccl-tests output: text, or .json (-J)")
    p.add_argument("--op", default=None,
                   help="the collective, when the log does not name its program (nccl-tests "
                        "before 2.15): all_reduce, all_gather, reduce_scatter, broadcast, "
                        "reduce, all_to_all, send_recv")
    p.add_argument("--ranks", type=int, default=None,
                   help="ranks, when the log has no '#  Rank' lines (otherwise checked)")
    p.add_argument("--nodes", type=int, default=None,
                   help="nodes, when the log has no '#  Rank' lines naming hosts")
    p.add_argument("--label", default="", help="a note stored with each run")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _read(path: Path) -> tuple[str, str]:
    """``(text, sha256)`` of a log; ConfigError naming the file when it cannot be read."""
    from willitscale.errors import ConfigError

    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError("LOG", str(path), f"a readable nccl-tests log ({exc.strerror})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("LOG", str(path), f"an nccl-tests log as text (byte {exc.start} is not "
                                            "UTF-8: is it a binary file?)") from None
    return text, hashlib.sha256(data).hexdigest()


def _parse(path: Path, text: str):
    from willitscale.results.importers.nccl_tests import parse_text
    from willitscale.results.importers.nccl_tests_json import parse_json

    is_json = path.suffix.lower() == ".json" or text.lstrip().startswith("{")
    return ("json", parse_json(text, str(path))) if is_json else ("text", parse_text(text, str(path)))


def _import_file(store, path: Path, args, now: str) -> tuple[list[dict], list, list[str]]:
    from willitscale.results.importers.nccl_import import SectionError, imported_run

    text, digest = _read(path)
    fmt, parsed = _parse(path, text)
    records, problems, notes = [], list(parsed.problems), []
    if not parsed.sections and not parsed.problems:
        from willitscale.results.exchange import Problem

        problems.append(Problem(file=str(path), line=1, message="no nccl-tests table in this file"))
    for index, section in enumerate(parsed.sections, start=1):
        source = f"nccl-tests {fmt} {path.name} sha256:{digest} section {index}"
        record = {"file": str(path), "line": section.first_line, "program": section.program,
                  "id": None, "skipped": None}
        known = store.run_from_source(source)
        if known is not None:
            records.append({**record, "skipped": f"already imported as run {known}"})
            continue
        origin = {"format": f"nccl-tests {fmt}", "file": str(path), "sha256": digest,
                  "section": index}
        try:
            run = imported_run(section, source=source, origin=origin, now=now, op=args.op,
                               ranks=args.ranks, nodes=args.nodes)
        except SectionError as exc:
            problems.append(exc.problem)
            records.append({**record, "skipped": "not imported (see below)"})
            continue
        problems += run.problems
        run_id = store.add_run(kind="collectives", started_at=run.started_at, finished_at=now,
                               status=run.status, label=args.label, options=run.options,
                               environment=run.environment, host=run.host, pid=run.pid,
                               source=source, rows=[(i, r.to_json()) for i, r in enumerate(run.rows)])
        env = run.environment
        records.append({**record, "id": run_id, "op": run.options["ops"][0], "ranks": env["world_size"],
                        "nodes": env["nodes"], "rows": len(run.rows), "status": run.status})
        notes += [f"{path}:{section.first_line}: {n}" for n in run.notes]
    return records, problems, notes


def run(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.errors import ConfigError
    from willitscale.results.store import Store, now_iso

    for name, value in (("--ranks", args.ranks), ("--nodes", args.nodes)):
        if value is not None and value < 1:
            raise ConfigError(name, value, "a count >= 1")
    paths = [Path(p).expanduser() for p in args.logs]
    for path in paths:  # all checked before anything is stored
        if not path.is_file():
            raise ConfigError("LOG", str(path), "an existing nccl-tests log file")
    now = now_iso()
    records, problems, notes = [], [], []
    with Store() as store:
        for path in paths:
            done, bad, said = _import_file(store, path, args, now)
            records += done
            problems += bad
            notes += said
    if args.json:
        print_json({"runs": records, "problems": [str(p) for p in problems], "notes": notes})
    else:
        print_table("imported nccl-tests runs", ["file", "line", "op", "ranks", "nodes", "rows",
                                                 "run", ""],
                    [[r["file"], r["line"], r.get("op", r["program"] or "?"), r.get("ranks", "-"),
                      r.get("nodes", "-"), r.get("rows", "-"), r["id"] if r["id"] else "-",
                      r["skipped"] or r["status"]] for r in records])
        for note in notes:
            print(f"note: {note}", file=sys.stderr)
    for problem in problems:
        print(f"not imported: {problem}", file=sys.stderr)
    stored = sum(r["id"] is not None for r in records)
    print(f"{stored} run(s) stored" + (f"; {len(problems)} problem(s), listed above"
                                       if problems else ""), file=sys.stderr)
    return 1 if problems else 0
