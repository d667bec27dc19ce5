"""``willitscale calibrate [RUN_ID ...] [-o FILE]``: fit the model to stored measurements.

Which link latency and bandwidth, and which compute efficiency, make the model match what was
measured? Collective sweeps give each link level's latency (alpha) and bandwidth; matmul runs give a
device's peak rate when the catalog has none (a CPU); training runs give the compute
efficiency and the optimizer's time per parameter. With no run ids, the newest finished run
of each kind (collectives, matmul, train) measured on the same setup as the newest of them.
The result is a TOML file for ``willitscale estimate --calibration FILE`` and ``willitscale
validate``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from willitscale.cli.paths import output_file, write_text

__all__ = ["register"]


def _op(text: str) -> str:
    """``--op``: a collective nccl-tests measures (checked when the flag is read)."""
    from willitscale.collectives.ops import parse_op

    return parse_op(text, field="--op").value


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser("calibrate", help="the link and compute figures that fit the stored measurements",
                              description=__doc__.split("\n\n", 1)[1].replace("``", ""), epilog=examples(
                                  "willitscale calibrate --gpu h100-sxm",
                                  "willitscale calibrate 3 4 5 -o cluster.toml",
                                  "willitscale estimate --model gpt2 --gpu h100-sxm --nodes 2 "
                                  "--calibration cluster.toml"))
    p.add_argument("run_ids", type=int, nargs="*", metavar="RUN_ID",
                   help="stored runs to fit (default: the newest finished run of each kind on the "
                        "newest run's setup)")
    p.add_argument("-o", "--output", default=None, type=output_file("--output"),
                   help="calibration file to write (default: in $WILLITSCALE_HOME/calibrations/)")
    p.add_argument("--op", default=None, type=_op,
                   help="collective to fit the links to (default all_reduce)")
    p.add_argument("--gpu", default=None,
                   help="the catalog GPU the devices are (e.g. h100-sxm), for their peak FLOP/s")
    p.add_argument("--profile", action="store_true",
                   help="write a measured profile (format 2): [[gemm]], [[attention]], [[memory]] "
                        "fitted to matmul, attention and bandwidth runs, with their [provenance] "
                        "(needs --gpu for the peaks)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


def _default_path(created: str) -> Path:
    from willitscale.results.home import home
    from willitscale.results.store_faults import make_private_dir

    stamp = created.replace("-", "").replace(":", "").replace("+0000", "")[:15]
    folder = home() / "calibrations"
    make_private_dir(folder)  # 0700, as the store's folder
    path, i = folder / f"calibration-{stamp}.toml", 1
    while path.exists():
        i += 1
        path = folder / f"calibration-{stamp}-{i}.toml"
    return path


def _library(backend: str) -> str:
    return {"gloo": "Gloo's", "nccl": "NCCL's"}.get(str(backend).lower(), str(backend))


def print_calibration(cal, path: str, notes: list[str]) -> None:
    from willitscale.cli.output import print_table
    from willitscale.units import format_bandwidth, format_time

    print(f"calibration {path}\n  from runs {list(cal.runs)}: {cal.setup}")
    if cal.links:
        print_table("links", ["level", "bandwidth", "latency", "of nominal", "fitted", "points",
                              "rms error"],
                    [[link.level, format_bandwidth(link.bandwidth), format_time(link.latency),
                      f"{link.efficiency:.1%}" if link.efficiency else "-",
                      f"{link.op} ({_library(link.backend)} {link.algorithm})", link.points,
                      f"{link.rms_error:.1%}"] for link in cal.links],
                    caption="bandwidth: one direction, as the fitted algorithm achieves it; "
                            "latency: alpha, per algorithm step")
    if cal.compute:
        print_table("compute", ["device", "dtype", "peak", "training", "efficiency", "optimizer"],
                    [[c.device, c.dtype, f"{c.peak_flop_rate / 1e12:.4g} TFLOP/s",
                      f"{c.achieved_flop_rate / 1e12:.4g} TFLOP/s" if c.achieved_flop_rate else "-",
                      f"{c.efficiency:.1%}" if c.efficiency else "-",
                      f"{c.optimizer_time_per_param * 1e9:.3g} ns/param"
                      if c.optimizer_time_per_param else "-"] for c in cal.compute],
                    caption="peak: " + "; ".join(f"{c.device} {c.dtype}: {c.peak_source}"
                                                 for c in cal.compute))
    curves = cal.section("collective")
    if curves:
        print_table("collectives", ["library", "op", "algorithm", "nodes x ranks", "latency", "algbw",
                                    "sizes", "points", "rms error"],
                    [[{"nccl": "NCCL", "gloo": "Gloo"}[c.backend], c.op, c.pair,
                      f"{c.nodes} x {c.ranks_per_node}", format_time(c.latency),
                      format_bandwidth(c.bandwidth), f"{c.min_size:,.0f}-{c.max_size:,.0f} B",
                      c.points, f"{c.rms_error:.1%}"] for c in curves],
                    caption="time = latency + size / algbw (NCCL's own form), size as nccl-tests "
                            "counts it; written as [[collective]] in the profile")
    for name, entries in cal.sections.items():
        if name == "collective":  # the table above
            continue
        print(f"[[{name}]]")
        for entry in entries:
            fields = [line for line in entry.toml_lines()[1:] if not line.startswith(("runs", "source"))]
            print("  " + ", ".join(fields))
    if cal.provenance is not None:
        print("  ".join(cal.provenance.toml_lines()))
    for note in notes:
        print(f"note: {note}", file=sys.stderr)


#: runs whose rows can be fitted: finished, or stopped part-way with the rows measured so far
FITTABLE = ("complete", "interrupted")


#: the kinds of run calibration fits, each contributing its own part
FITTED_KINDS = ("collectives", "matmul", "train")


def _setup_key(info) -> tuple:
    """What must match for runs to describe one cluster: backend, devices and, for runs across
    nodes, the network (a single-node run matches any)."""
    env = info.environment or {}
    uplink = (env.get("emulated") or {}).get("uplink_Bps") if (env.get("nodes") or 1) > 1 else "*"
    return (env.get("backend"), tuple(env.get("devices") or ()), uplink)


def _same_setup(a: tuple, b: tuple) -> bool:
    return a[:2] == b[:2] and "*" in (a[2], b[2]) or a == b


def _shape(info) -> tuple:
    """Runs of one kind and one shape (nodes, ranks per node) fit one thing: keep the newest."""
    env = info.environment or {}
    return info.kind, env.get("nodes"), env.get("ranks_per_node")


def _latest_fittable(store) -> list[int]:
    """The newest finished (or interrupted) run with rows of each fitted kind, all on the setup
    of the newest of them; says on stderr which runs it took and which it passed over, and names
    the newest run when none fits."""
    from willitscale.errors import ConfigError

    runs = store.runs()
    if not runs:
        store.latest_run_id()  # the store's own "no runs yet" message
    fittable = [i for i in runs if i.status in FITTABLE and i.rows and i.kind in FITTED_KINDS]
    if not fittable:
        newest = runs[0]
        raise ConfigError(f"no run to calibrate: the latest, run {newest.id} ({newest.kind}), is "
                          f"{newest.status} with {newest.rows} rows, and no earlier run finished "
                          "with rows; give run ids (`willitscale results list`)")
    setup = _setup_key(fittable[0])
    chosen: dict[tuple, int] = {}
    skipped = []
    for info in fittable:  # newest first
        if _shape(info) in chosen:
            continue
        if not _same_setup(_setup_key(info), setup):
            skipped.append(info.id)
            continue
        if setup[2] == "*":  # the first run across nodes sets the network for the rest
            setup = _setup_key(info)
        chosen[_shape(info)] = info.id
    ids = sorted(chosen.values())
    print(f"note: calibrating runs {ids} (the newest "
          + ", ".join(f"{kind} run {i}" for (kind, *_), i in chosen.items())
          + " on the setup of run " + f"{fittable[0].id})"
          + (f"; runs {sorted(skipped)[-5:]} are on another setup (give ids to fit them)"
             if skipped else "")
          + (f"; the latest, run {runs[0].id} ({runs[0].kind}), is {runs[0].status} with "
             f"{runs[0].rows} rows" if runs[0].id not in ids else ""), file=sys.stderr)
    return ids


def _profile(args, runs, stored, created):
    from willitscale.calibrate.measured_profile import measured_profile
    from willitscale.errors import ConfigError
    from willitscale.hardware.catalog import get_gpu

    if not args.gpu:
        raise ConfigError("--gpu", None, "the catalog GPU the runs measured (e.g. h100-sxm, h200): "
                          "its dense peaks are what the efficiencies are fractions of")
    records = [dict(r.info.environment.get("provenance") or {}) for r in stored]
    return measured_profile(runs, records, gpu=get_gpu(args.gpu), created=created)


def _write_steps(path: Path, runs, provenance) -> list[str]:
    """With train runs among the profile's: their one-GPU steps in a steps file beside it
    (``validate --profile FILE --steps FILE`` compares them)."""
    from willitscale.calibrate.measured_steps import steps_from_train_rows, steps_toml

    trains = [(r.id, r.rows) for r in runs if r.kind == "train"]
    if not trains:
        return []
    steps, notes = steps_from_train_rows(trains)
    if steps:
        out = path.with_name(path.stem + "-steps.toml")
        write_text(out, steps_toml(steps, synthetic=False, provenance=provenance,
                                   header=f"Measured training steps (bench train), runs {[i for i, _ in trains]}"))
        print(f"steps: {out} ({len(steps)} steps): willitscale validate --profile {path} --steps {out}")
    return notes


def run(args: argparse.Namespace) -> int:
    from willitscale.calibrate.build import calibrate
    from willitscale.calibrate.runs import measured_run
    from willitscale.cli.output import print_json
    from willitscale.results.store import Store, now_iso

    created = now_iso()
    with Store() as store:
        ids = args.run_ids or _latest_fittable(store)
        stored = [store.run(i) for i in ids]
        runs = [measured_run(r) for r in stored]
        if args.profile:
            cal, notes = _profile(args, runs, stored, created)
        else:
            cal, notes = calibrate(runs, created=created, op=args.op, gpu=args.gpu)
        path = Path(args.output) if args.output else _default_path(created)
        text = cal.to_toml()
        if args.profile:
            from willitscale.calibrate.measured_profile import with_absent_notes

            text = with_absent_notes(text, stored[0].info.environment.get("provenance") or {})
        write_text(path, text)
        store.add_calibration(path=str(path.resolve()), runs=cal.runs, toml=text)
        if args.profile:
            notes += _write_steps(path, runs, cal.provenance)
    if args.json:
        print_json({"path": str(path), "toml": text, "notes": notes,
                    "links": [{"level": link.level, "bandwidth_GBps": link.bandwidth / 1e9,
                               "latency_us": link.latency / 1e-6, "efficiency": link.efficiency,
                               "points": link.points, "rms_error": link.rms_error,
                               "backend": link.backend, "device": link.device,
                               "ranks_per_node": link.ranks_per_node,
                               "nics_per_node": link.nics_per_node,
                               "runs": list(link.runs)} for link in cal.links],
                    "collective": [{"backend": c.backend, "op": c.op, "algorithm": c.algorithm,
                                    "protocol": c.protocol, "nodes": c.nodes,
                                    "ranks_per_node": c.ranks_per_node, "latency_us": c.latency / 1e-6,
                                    "algbw_GBps": c.bandwidth / 1e9, "points": c.points,
                                    "rms_error": c.rms_error, "runs": list(c.runs)}
                                   for c in cal.section("collective")],
                    "compute": [{"device": c.device, "dtype": c.dtype,
                                 "peak_TFLOPS": c.peak_flop_rate / 1e12,
                                 "achieved_TFLOPS": (c.achieved_flop_rate or 0) / 1e12 or None,
                                 "efficiency": c.efficiency, "runs": list(c.runs)}
                                for c in cal.compute]})
    else:
        print_calibration(cal, str(path), notes)
    return 0
