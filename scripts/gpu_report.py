"""Tables (Markdown) and figures of what scripts/gpu_capture.sh measured, for docs/measure.md's
"Measured on an H100/H200" and the issue note: run on the capture's results store.

    WILLITSCALE_HOME=<capture>/home PYTHONPATH=src python3 scripts/gpu_report.py OUT_DIR [GPU]

Writes OUT_DIR/report.md (provenance; GEMM TFLOP/s and fraction of the catalog peak for the
squares; attention TFLOP/s per backend over sequence length, unsupported rows with their reason;
bandwidth; the training steps with peak memory) and, with matplotlib, attention.png and
gemm.png. Only runs labelled "issue18" (the capture's) are read. GPU: the catalog name for the
peaks (default: from the provenance's device name).
"""

from __future__ import annotations

import sys
from collections import defaultdict
from pathlib import Path

from willitscale.hardware.catalog import get_gpu
from willitscale.results.records import row_from_json
from willitscale.results.store import Store

SHORT = {"FLASH_ATTENTION": "flash", "CUDNN_ATTENTION": "cudnn", "EFFICIENT_ATTENTION": "efficient",
         "MATH": "math"}
PEAK_KEY = {"bfloat16": "bf16", "float8_e4m3fn-tensorwise": "fp8", "float8_e4m3fn-rowwise": "fp8"}


def _runs(store: Store) -> dict[str, list]:
    out = defaultdict(list)
    for info in reversed(store.runs()):
        if "issue18" in info.label and info.status == "complete":
            run = store.run(info.id)
            out[info.kind].append((info, [row_from_json(info.kind, r) for r in run.rows]))
    return out


def _gpu_name(device: str) -> str:
    return "h200" if "H200" in device else ("h100-pcie" if "PCIe" in device else "h100-sxm")


def _table(header: list[str], rows: list[list]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header),
            *("| " + " | ".join(str(c) for c in r) + " |" for r in rows), ""]


def _gemm(runs, gpu) -> list[str]:
    rows = [r for _, rs in runs for r in rs if r.m == r.n == r.k]
    body = [[f"{r.m}", r.dtype, f"{r.flop_rate / 1e12:.0f}",
             f"{r.flop_rate / gpu.peak_flops[PEAK_KEY.get(r.dtype, 'bf16')]:.2f}"]
            for r in sorted(rows, key=lambda r: (r.dtype, r.m))]
    return ["### GEMM (squares)", "", *_table(["M = N = K", "dtype", "TFLOP/s", "of dense peak"], body)]


def _attention(runs) -> list[str]:
    rows = [r for _, rs in runs for r in rs]
    seqs = sorted({r.seq_len for r in rows})
    lines = ["### Attention (SDPA, TFLOP/s on the FLOPs the kernel executes)", ""]
    groups = sorted({(r.head_dim, r.causal, r.direction, r.backend) for r in rows})
    body = []
    for d, causal, direction, backend in groups:
        cells = {r.seq_len: (f"{r.flop_rate / 1e12:.0f}" if r.status == "ok" else r.status[:5])
                 for r in rows if (r.head_dim, r.causal, r.direction, r.backend) == (d, causal, direction, backend)}
        body.append([d, "causal" if causal else "full", direction, SHORT.get(backend, backend),
                     *(cells.get(s, "") for s in seqs)])
    lines += _table(["d", "mask", "pass", "backend", *map(str, seqs)], body)
    reasons = sorted({(SHORT.get(r.backend, r.backend), r.reason[:160]) for r in rows if r.status == "unsupported"})
    lines += [f"- {b}: {why}" for b, why in reasons] + [""]
    return lines


def _bandwidth(runs) -> list[str]:
    rows = [r for _, rs in runs for r in rs]
    body = [[r.op, r.elements, r.dtype, f"{r.bandwidth / 1e9:.0f}"] for r in rows]
    return ["### Memory-bound kernels", "", *_table(["op", "elements", "dtype", "GB/s"], body)]


def _train(runs) -> list[str]:
    body = [[r.model, f"{r.batch_per_rank} x {r.seq_len}", f"{r.step * 1e3:.1f}", f"{r.forward * 1e3:.1f}",
             f"{r.backward_no_sync * 1e3:.1f}", f"{r.optimizer * 1e3:.1f}",
             "-" if r.peak_allocated_bytes is None else f"{r.peak_allocated_bytes / 2**30:.2f}",
             "-" if r.peak_reserved_bytes is None else f"{r.peak_reserved_bytes / 2**30:.2f}"]
            for _, rs in runs for r in rs]
    return ["### Training steps (bench train, one GPU, bf16 autocast)", "",
            *_table(["model", "batch x seq", "step (ms)", "forward", "backward", "optimizer",
                     "peak alloc (GiB)", "peak reserved (GiB)"], body)]


def _figures(out: Path, runs) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    rows = [r for _, rs in runs.get("attention", []) for r in rs if r.status == "ok"]
    if rows:
        fig, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=True)
        for ax, direction in zip(axes, ("forward", "backward"), strict=True):
            for key in sorted({(r.backend, r.causal, r.head_dim) for r in rows if r.direction == direction}):
                pts = sorted((r.seq_len, r.flop_rate / 1e12) for r in rows
                             if (r.backend, r.causal, r.head_dim) == key and r.direction == direction)
                ax.plot(*zip(*pts, strict=True), marker="o", label=f"{SHORT[key[0]]} {'causal' if key[1] else 'full'} d{key[2]}")
            ax.set_xscale("log", base=2)
            ax.set_title(direction)
            ax.set_xlabel("sequence length")
        axes[0].set_ylabel("TFLOP/s")
        axes[1].legend(fontsize=6, ncol=2)
        fig.tight_layout()
        fig.savefig(out / "attention.png", dpi=120)


def main(out: Path, gpu_name: str | None) -> None:
    out.mkdir(parents=True, exist_ok=True)
    with Store() as store:
        runs = _runs(store)
    first = next((info for kind in runs for info, _ in runs[kind]), None)
    prov = dict((first.environment.get("provenance") or {}) if first else {})
    gpu = get_gpu(gpu_name or _gpu_name(prov.get("device", "")))
    lines = ["## Measured on " + (prov.get("device") or "?"), "",
             "Provenance: " + ", ".join(f"{k} {v}" for k, v in prov.items() if k != "absent"), ""]
    if prov.get("absent"):
        lines += ["Not recorded: " + ", ".join(f"{k} ({v})" for k, v in prov["absent"].items()), ""]
    for kind, section in (("matmul", lambda r: _gemm(r, gpu)), ("attention", _attention),
                          ("bandwidth", _bandwidth), ("train", _train)):
        if runs.get(kind):
            lines += section(runs[kind])
    (out / "report.md").write_text("\n".join(lines) + "\n")
    _figures(out, runs)
    print(f"wrote {out / 'report.md'}")


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
