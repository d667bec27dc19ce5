"""``willitscale size``: GPUs to train a model within a deadline, and the fewest that hold it."""

from __future__ import annotations

import argparse

from willitscale.errors import ConfigError

HELP = "how many GPUs train a model within a deadline; the fewest that hold it"

DESCRIPTION = """\
How many GPUs does it take to train a model within a deadline, and what is the fewest that can
hold its training state? From the total FLOPs (or parameters x tokens x 6), the GPU's peak and
the utilization you expect. The first example is table 1 of 'GPU fabrics for GenAI workloads'."""


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser(
        "size", help=HELP, description=DESCRIPTION, epilog=examples(
            "willitscale size --zflops 430 --gpu-tflops 624 --utilization 0.3 --weeks 1",
            "willitscale size --params 70B --tokens 2T --gpu h100 --utilization 0.4 --days 30"),
    )
    work = p.add_argument_group("the work (total FLOPs, or parameters and tokens)")
    work.add_argument("--zflops", type=float, help="total training FLOPs in ZFLOP (1e21)")
    work.add_argument("--flops", help="total training FLOPs, e.g. 3.15e23")
    work.add_argument("--params", help="parameters, e.g. 175e9 or 175B")
    work.add_argument("--tokens", help="training tokens, e.g. 300e9 or 300B")
    work.add_argument("--flops-per-param-token", type=float, default=6.0,
                      help="FLOPs per parameter per token: 6 (default) or 8 with full recomputation")
    gpu = p.add_argument_group("the GPU")
    gpu.add_argument("--gpu", help="catalog GPU name (peak and memory from the catalog)")
    gpu.add_argument("--dtype", default="bf16", help="dtype of the catalog peak (default bf16)")
    gpu.add_argument("--gpu-tflops", type=float, help="peak TFLOP/s per GPU (overrides --gpu's)")
    gpu.add_argument("--gpu-memory", help="memory per GPU, e.g. 80GB or 80GiB (overrides --gpu's)")
    p.add_argument("--utilization", type=float, default=None,
                   help="fraction of peak achieved on the counted FLOPs (required for a deadline)")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--weeks", type=float, help="deadline in weeks")
    when.add_argument("--days", type=float, help="deadline in days")
    when.add_argument("--deadline", help="deadline with a unit, e.g. '2 weeks', 10d, 36h")
    p.add_argument("--state-bytes-per-param", type=float, default=16.0,
                   help="training-state bytes per parameter for the fewest-GPUs answer "
                        "(16: mixed-precision Adam, ZeRO paper)")
    p.add_argument("--usable-memory", type=float, default=1.0,
                   help="fraction of each GPU's memory the state may use (default 1)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(run=run)


def _deadline(args: argparse.Namespace) -> float | None:
    from willitscale.plan.sizing import SECONDS_PER_WEEK
    from willitscale.units import parse_time

    for flag, value in (("--weeks", args.weeks), ("--days", args.days)):
        if value is not None and not value > 0:
            raise ConfigError(flag, value, "a number > 0")
    if args.weeks is not None:
        return args.weeks * SECONDS_PER_WEEK
    if args.days is not None:
        return args.days * 86400.0
    if args.deadline is not None:
        return parse_time(args.deadline, field="--deadline")
    return None


def _total_flops(args: argparse.Namespace, params: float | None) -> float | None:
    from willitscale.plan.sizing import training_flops
    from willitscale.units import parse_count, parse_flop_rate

    given = [n for n in ("zflops", "flops") if getattr(args, n) is not None]
    if len(given) > 1:
        raise ConfigError("give only one of --zflops and --flops")
    if given and args.tokens is not None:
        raise ConfigError(f"give either --{given[0]} ({getattr(args, given[0])}) or --params with "
                          f"--tokens ({args.params} x {args.tokens}), not both: each sets the total FLOPs")
    if args.zflops is not None:
        return args.zflops * 1e21
    if args.flops is not None:
        return parse_flop_rate(args.flops, field="--flops")
    if args.tokens is not None:
        if params is None:
            raise ConfigError("--tokens needs --params (total FLOPs = k x params x tokens)")
        tokens = parse_count(args.tokens, field="--tokens")
        return float(training_flops(params, tokens, flops_per_param_token=args.flops_per_param_token))
    return None


def _gpu_figures(args: argparse.Namespace) -> tuple[float | None, float | None, str]:
    from willitscale.units import parse_size

    peak = memory = None
    name = ""
    if args.gpu:
        from willitscale.hardware import get_gpu

        gpu = get_gpu(args.gpu)
        peak, memory, name = gpu.peak(args.dtype), gpu.memory, gpu.name
    if args.gpu_tflops is not None:
        if args.gpu_tflops <= 0:
            raise ConfigError("--gpu-tflops", args.gpu_tflops, "a number > 0")
        peak = args.gpu_tflops * 1e12
    if args.gpu_memory is not None:
        memory = parse_size(args.gpu_memory, field="--gpu-memory", unit_required=True, bits=False)
    return peak, memory, name


def size_report(args: argparse.Namespace) -> dict:
    """The answer as a JSON-ready dict (keys carry their units)."""
    from willitscale.plan.sizing import gpus_for_deadline, gpus_to_hold_state
    from willitscale.units import parse_count

    params = parse_count(args.params, field="--params") if args.params is not None else None
    total = _total_flops(args, params)
    peak, memory, gpu_name = _gpu_figures(args)
    seconds = _deadline(args)
    out: dict = {}
    if total is not None:
        if peak is None:
            raise ConfigError("a deadline answer needs the GPU's peak: give --gpu or --gpu-tflops")
        if args.utilization is None:
            raise ConfigError("a deadline answer needs --utilization (fraction of peak achieved)")
        if seconds is None:
            raise ConfigError("a deadline answer needs --weeks, --days or --deadline")
        gpus = gpus_for_deadline(total, peak_flops=peak, utilization=args.utilization, seconds=seconds)
        out.update({
            "gpus": gpus,
            "gpus_exact": total / (peak * args.utilization * seconds),
            "total_flops": total,
            "gpu_peak_flop_per_s": peak,
            "utilization": args.utilization,
            "deadline_s": seconds,
        })
        if gpu_name:
            out["gpu"] = gpu_name
    if params is not None and memory is not None:
        out["min_gpus_to_hold_state"] = gpus_to_hold_state(
            params, bytes_per_param=args.state_bytes_per_param, gpu_memory=memory,
            usable=args.usable_memory)
        out["state_bytes"] = params * args.state_bytes_per_param
        out["gpu_memory_bytes"] = memory
        out["state_bytes_per_param"] = args.state_bytes_per_param
    if not out:
        raise ConfigError(
            "nothing to size: give the work (--zflops, --flops, or --params with --tokens) with "
            "--gpu-tflops/--gpu, --utilization and a deadline; or --params with --gpu-memory/--gpu "
            "for the fewest GPUs that hold the training state"
        )
    return out


def run(args: argparse.Namespace) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.units import format_flop_rate, format_size, format_time

    report = size_report(args)
    if args.json:
        print_json(report)
        return 0
    rows = []
    if "gpus" in report:
        rows += [
            ("GPUs for the deadline", f"{report['gpus']:,}"),
            ("  exact ratio", f"{report['gpus_exact']:,.2f} (rounded up)"),
            ("  total training compute", f"{report['total_flops']:.3g} FLOP "
                                         f"({report['total_flops'] / 1e21:,.4g} ZFLOP)"),
            ("  per GPU", f"{format_flop_rate(report['gpu_peak_flop_per_s'])} peak x "
                          f"{report['utilization']:g} utilisation"),
            ("  deadline", format_time(report["deadline_s"])),
        ]
    if "min_gpus_to_hold_state" in report:
        rows += [
            ("fewest GPUs holding the state", f"{report['min_gpus_to_hold_state']:,}"),
            ("  training state", f"{format_size(report['state_bytes'])} "
                                 f"({report['state_bytes_per_param']:g} B/param)"),
            ("  memory per GPU", f"{format_size(report['gpu_memory_bytes'])} "
                                 f"({format_size(report['gpu_memory_bytes'], binary=True)})"),
        ]
    print_table("Cluster size", ["quantity", "value"], rows)
    return 0
