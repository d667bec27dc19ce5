"""``willitscale bench collectives|matmul|train|attention|bandwidth``: measure this machine or cluster.

What does this machine or cluster really achieve? Collective sweeps with nccl-tests' semantics
(algbw, busbw, a correctness count), matmul FLOP/s (BF16, FP8), attention per SDPA backend,
memory-bound kernels' bandwidth, and a DDP training step split into its parts, through
torch.distributed (NCCL on GPUs, Gloo on CPUs). Every run is kept in the results
store. docs/measure.md.

Three ways to start the ranks: ``--nproc N`` here (the built-in spawner), ``torchrun ... -m
willitscale bench <kind> ...`` (each process is one worker), or inside ``willitscale
emulate`` (which tells the spawner its node's place). Rank 0 stores each row as it is measured
and prints the table (or ``--json``) at the end.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from willitscale.bench.kernel_options import (
    add_attention_args,
    add_bandwidth_args,
    kernel_options_from_args,
)
from willitscale.bench.options import (
    OPTIONS_ENV,
    add_collective_args,
    add_matmul_args,
    add_train_args,
    options_from_args,
)

__all__ = ["register", "table_of"]

_KINDS = {
    "collectives": (add_collective_args, "collective sweep with nccl-tests semantics (algbw, busbw, #wrong)"),
    "matmul": (add_matmul_args, "achieved FLOP/s of matrix products over sizes and dtypes"),
    "train": (add_train_args, "a DDP training step of a GPT-2-family model, and its parts"),
    "attention": (add_attention_args, "SDPA forward/backward TFLOP/s per backend over sequence lengths"),
    "bandwidth": (add_bandwidth_args, "HBM bandwidth of memory-bound kernels (copy, norm, AdamW)"),
}

#: what each benchmark answers, and examples
_ABOUT = {
    "collectives": ("What bus bandwidth do the collectives reach over message sizes, and is every "
                    "element right? A sweep with nccl-tests' semantics: barrier, timer, iters ops, "
                    "sync; algbw = size / time, busbw = algbw x the op's factor; #wrong counts "
                    "elements off the exact expectation.",
                    ("willitscale bench collectives --nproc 8 --ops all_reduce -b 1MB -e 1GB --plot figs",
                     "torchrun --standalone --nproc-per-node=gpu -m willitscale bench collectives "
                     "-b 1MB -e 1GB",
                     "willitscale bench collectives --nproc 2 --ops all -b 1kB -e 64kB --mode both")),
    "matmul": ("What FLOP/s do matrix products reach on these devices, per size and dtype? (On a "
               "CPU the best is the peak calibration uses.)",
               ("willitscale bench matmul --nproc 1 --sizes 4096,8192 --dtypes bf16,fp32",
                "willitscale bench matmul --sizes 4096x4096x1024")),
    "train": ("How long does a real DDP training step take here, and how much of its gradient "
              "all-reduce does backward hide? A GPT-2-family model trained with "
              "DistributedDataParallel: step, forward, backward, optimizer, and backward under "
              "no_sync for the exposed communication.",
              ("willitscale bench train --nproc 8 --model gpt2 --seq-len 1024 --batch 8 "
               "--dtype bfloat16",
               "willitscale bench train --nproc 2 --model gpt2-tiny")),
    "attention": ("What TFLOP/s does each PyTorch SDPA backend (flash, cudnn, efficient, math) reach, "
                  "forward and backward, causal and not, over sequence lengths? A backend that "
                  "cannot run a shape is a row marked unsupported, with torch's reason. FLOPs: "
                  "forward 4 b h s^2 d, backward 2.5x, causal half (the kernel skips the masked "
                  "blocks).",
                  ("willitscale bench attention --seq-lens 512,2048,8192,32768,131072 --head-dims 128",
                   "willitscale bench attention --backends flash,math --causal causal --dtype float32 "
                   "--seq-lens 256,512")),
    "bandwidth": ("What HBM bandwidth do the memory-bound kernels of a training step reach (copy, "
                  "add, GELU, LayerNorm, a fused AdamW step)? Bytes are counted from the operands.",
                  ("willitscale bench bandwidth",
                   "willitscale bench bandwidth --ops copy,adamw --sizes 1048576,16777216")),
}


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    parser = subparsers.add_parser(
        "bench", help="what this cluster achieves: collective busbw, matmul/attention FLOP/s, HBM bandwidth, a DDP step",
        description=__doc__.split("\n\n", 1)[1].replace("``", ""),
        epilog=examples(*(about[1][0] for about in _ABOUT.values())))
    kinds = parser.add_subparsers(dest="bench_kind", metavar="BENCH", parser_class=type(parser))
    for kind, (add_args, help_text) in _KINDS.items():
        about, shown = _ABOUT[kind]
        p = kinds.add_parser(kind, help=help_text, description=about, epilog=examples(*shown))
        add_args(p)
        launch = p.add_argument_group("launching (ignored under torchrun)")
        launch.add_argument("--nproc", type=int, default=None,
                            help="ranks on this node (default: one per GPU, else 1)")
        launch.add_argument("--nnodes", type=int, default=None, help="nodes in the job (default 1)")
        launch.add_argument("--node-rank", type=int, default=None, help="this node's index")
        launch.add_argument("--master-addr", default=None, help="node 0's address")
        launch.add_argument("--master-port", type=int, default=None,
                            help="node 0's rendezvous port (single node: picked automatically)")
        launch.add_argument("--timeout", type=float, default=None, metavar="SECONDS",
                            help="a rank that makes no progress for this long (stopped, or in a "
                                 "collective that never completes) is named and the job stopped "
                                 "(default: $WILLITSCALE_TIMEOUT_S, else 300)")
        out = p.add_argument_group("output")
        out.add_argument("--json", action="store_true", help="print the rows as JSON")
        out.add_argument("--label", default="", help="a note stored with the run")
        out.add_argument("--no-store", action="store_true", help="do not keep the run in the store")
        if kind == "collectives":
            from willitscale.cli.paths import output_directory

            out.add_argument("--format", choices=("table", "nccl-tests"), default="table",
                             help="print willitscale's table (default) or nccl-tests' own layout "
                                  "(header, one line per size with out-of-place and in-place "
                                  "halves, '# Avg bus bandwidth'); nccl-tests also reads -b, -e "
                                  "and -i its way: 128M = 128 x 2^20 B, a bare number is bytes "
                                  "(elsewhere in willitscale 128MB = 128 x 10^6 B)")

            out.add_argument("--plot", metavar="DIR", type=output_directory("--plot"),
                             help="also draw busbw vs message size, measured and predicted (the "
                                  "latest calibration, else the catalog), as PNG and SVG into DIR "
                                  "(needs matplotlib: pip install 'willitscale[plot]')")
        p.set_defaults(run=functools.partial(run, kind))


def run(kind: str, args: argparse.Namespace) -> int:
    from willitscale.bench.ranks.worker import Job

    payload = os.environ.get(OPTIONS_ENV)
    if payload:  # a worker started by our spawner
        return _run_worker(Job.from_json(json.loads(payload)))
    plot = getattr(args, "plot", None) or ""
    if plot:  # before any work: a missing matplotlib stops here, not after the sweep
        from willitscale.report.plots.base import require_matplotlib

        require_matplotlib()
    make = kernel_options_from_args if kind in ("attention", "bandwidth") else options_from_args
    job = Job(kind=kind, options=make(kind, args), json=args.json, label=args.label,
              store=not args.no_store, plot=os.path.abspath(plot) if plot else "",
              format=getattr(args, "format", "table"))
    from willitscale.bench.ranks.watch import TIMEOUT_ENV, timeout_s

    timeout = timeout_s(args.timeout)
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:  # a worker started by torchrun
        os.environ[TIMEOUT_ENV] = repr(timeout)  # its collectives' timeout (bench.ranks.dist)
        return _run_worker(job)
    from willitscale.bench.ranks.dist import import_torch
    from willitscale.bench.ranks.launch import LaunchSpec, launch

    if kind == "collectives":
        from willitscale.bench.sweep import sweep_end_note

        o = job.options
        note = sweep_end_note(o.min_bytes, o.max_bytes, factor=o.factor, step_bytes=o.step_bytes)
        if note:
            print(note, file=sys.stderr)

    spec = LaunchSpec.from_env(nproc=args.nproc, nnodes=args.nnodes, node_rank=args.node_rank,
                               master_addr=args.master_addr, master_port=args.master_port)
    import_torch()
    outcome = launch(kind, job.to_json(), spec, timeout=timeout)
    if outcome.failure:
        stored = (f"; its finished rows are kept in run {outcome.run_id}, marked failed: "
                  f"willitscale results show {outcome.run_id}" if outcome.marked else "")
        print(f"error: {outcome.failure}{stored}", file=sys.stderr)
    return outcome.code


def _run_worker(job) -> int:
    from willitscale.bench.ranks.worker import run_job

    result = run_job(job)
    if result.rank != 0:
        return 130 if result.status == "interrupted" else 0
    from willitscale.cli.output import print_json, print_table

    if job.json:
        print_json([row.to_json() for row in result.rows])
    elif job.format == "nccl-tests":
        from willitscale.report.nccl_tests import nccl_tests_text

        sys.stdout.write(nccl_tests_text([r.to_json() for r in result.rows],
                                         options=job.options.to_json(),
                                         environment=result.environment or {}))
    else:
        title, columns, units, rows = table_of(job.kind, [r.to_json() for r in result.rows])
        env = result.environment or {}
        caption = (f"{env.get('world_size')} ranks on {env.get('nodes')} node(s), "
                   f"{env.get('backend')}, {', '.join(env.get('devices') or [])}")
        print_table(title, columns, rows, units=units, caption=caption)
    if job.plot and result.rows:
        from willitscale.cli.plot_flag import collective_plots

        collective_plots(job.plot, dict(result.environment or {}),
                         [r.to_json() for r in result.rows], run_id=result.run_id)
    if result.run_id is not None:
        print(f"stored as run {result.run_id}: willitscale results show {result.run_id}",
              file=sys.stderr)
    if result.status == "interrupted":
        print(f"interrupted: {len(result.rows)} finished rows kept", file=sys.stderr)
        return 130
    return 0


def _num(value: float, digits: int = 2) -> str:
    return f"{value:.{digits}f}" if abs(value) >= 0.01 or value == 0 else f"{value:.3g}"


def _time_us(us: float) -> str:
    """nccl-tests' precision: 0 decimals from 10 ms, 1 from 100 us, else 2."""
    return f"{us:.0f}" if us >= 10_000 else (f"{us:.1f}" if us >= 100 else f"{us:.2f}")


def table_of(kind: str, rows: Sequence[dict[str, Any]]):
    """``(title, columns, units, rows)`` to print stored rows of benchmark ``kind``."""
    if kind == "collectives":
        columns = ["op", "size", "count", "type", "redop", "root", "place", "time", "algbw",
                   "busbw", "#wrong"]
        units = ["", "(B)", "(elements)", "", "", "", "", "(us)", "(GB/s)", "(GB/s)", ""]
        body = [[r["op"], r["size_bytes"], r["count"], r["type"], r["redop"], r["root"],
                 "in" if r["in_place"] else "out", _time_us(r["time_us"]), _num(r["algbw_GBps"]),
                 _num(r["busbw_GBps"]), r["wrong"] if r.get("checked", True) else "N/A"]
                for r in rows]
        # root and place only when they say something (keeps the table within 80 columns)
        drop = [i for i, show in ((5, any(r["root"] >= 0 for r in rows)),
                                  (6, any(r["in_place"] for r in rows))) if not show]
        keep = [i for i in range(len(columns)) if i not in drop]
        columns, units = [columns[i] for i in keep], [units[i] for i in keep]
        body = [[line[i] for i in keep] for line in body]
        return "collectives", columns, units, body
    if kind == "matmul":
        columns = ["m", "n", "k", "type", "device", "time", "achieved"]
        units = ["", "", "", "", "", "(us)", "(TFLOP/s)"]
        body = [[r["m"], r["n"], r["k"], r["type"], r["device"], _time_us(r["time_us"]),
                 _num(r["achieved_TFLOPS"], 3)] for r in rows]
        return "matmul", columns, units, body
    if kind in ("attention", "bandwidth"):
        from willitscale.cli.kernel_tables import kernel_table

        return kernel_table(kind, rows)
    # one column per measured configuration, one line per quantity: fits 80 columns
    lines = [
        ("model", "", lambda r: r["model"]), ("parameters", "", lambda r: f"{r['params']:,}"),
        ("ranks on nodes", "", lambda r: f"{r['ranks']} on {r['nodes']}"),
        ("batch per rank x seq", "", lambda r: f"{r['batch_per_rank']} x {r['seq_len']}"),
        ("DDP bucket", "(MiB)", lambda r: _num(r["bucket_bytes"] / 2**20, 1)),
        ("step", "(ms)", lambda r: _num(r["step_s"] * 1e3, 1)),
        ("  forward", "(ms)", lambda r: _num(r["forward_s"] * 1e3, 1)),
        ("  backward", "(ms)", lambda r: _num(r["backward_s"] * 1e3, 1)),
        ("  optimizer", "(ms)", lambda r: _num(r["optimizer_s"] * 1e3, 1)),
        ("backward under no_sync", "(ms)", lambda r: _num(r["backward_no_sync_s"] * 1e3, 1)),
        ("exposed communication", "(ms)", lambda r: _num(r["exposed_comm_s"] * 1e3, 1)),
        ("tokens/s", "", lambda r: f"{r['tokens_per_s']:,.0f}"),
    ]
    if any(r.get("peak_allocated_bytes") is not None for r in rows):  # measured on a GPU
        lines += [(f"peak {what}", "(GiB)", lambda r, k=f"peak_{what}_bytes":
                   "-" if r.get(k) is None else _num(r[k] / 2**30, 2))
                  for what in ("allocated", "reserved")]
    columns = ["", "unit", *[f"#{i}" if len(rows) > 1 else "measured" for i in range(len(rows))]]
    body = [[name, unit, *[value(r) for r in rows]] for name, unit, value in lines]
    units = None
    return "train", columns, units, body
