"""What a training step sustains of the kernel benchmarks' rates: :func:`sustained_curves`.

The GEMM and attention curves come from kernel benchmarks: one GPU, one kernel, a short
loop. A training step runs the same kernels for minutes on every GPU of a node at once, under
the node's power and thermal limits, beside NCCL kernels, launched from framework code. The
step runs them slower than the benchmark, and the per-op model names no single cause for it:
this is the model's one empirical factor per GPU architecture, applied to the compute-bound
rates (GEMM and attention efficiencies; memory-bound work keeps its bandwidth).

It is **fitted on the fit rows only** of the published-run validation set (docs/validation.md):
for each architecture, the factor on a 0.005 grid with the least root-mean-square relative
throughput error over that architecture's expressible fit rows, with the rest of the model as it
is (``tests/golden/test_published_runs.py`` checks that its neighbours on the grid do worse).

==============  ======  ========================================================================
architecture    factor  fitted on
==============  ======  ========================================================================
ampere          0.850   Narayanan et al. 2021 Table 1 (10 rows: Megatron-LM, A100, fp16)
hopper          0.820   the float8/FSDP2 post (12 rows, H100, bf16 and fp8) and Nemotron-4 340B
                        (3 rows, H100, Megatron-LM)
blackwell       0.820   no fit row: Hopper's (a named approximation)
cdna3           0.820   no fit row: Hopper's (a named approximation)
==============  ======  ========================================================================

Hopper's was 0.825 until the interleaved schedule's gradient buckets began to overlap the
backward of ``min(m, p)`` micro-batches (:func:`willitscale.step.tail.sync_window`), which moved
the Nemotron-4 fit rows; the grid optimum on the same fit rows was then 0.820. It is 0.815 since
FlashAttention-2 on Hopper is timed per pass (the forward from the FA3 paper's figure, the
backward derived from FA2's forward+backward figure: ``compute/curves.toml``), which moved the
float8/FSDP2 fit rows by up to 0.3% (RMS 0.08821 at 0.815 against 0.08822 at 0.820). It is 0.820
again since point-to-point sends are costed on NCCL's own schedule (channels per peer; pipeline
sends across nodes got slower), which moved the fit rows (RMS 0.08838 at 0.820 against 0.08843
at 0.815 and 0.08860 at 0.825): the grid is flat there, the factor is known to about +-0.005.

A measured profile's curves (``bench matmul`` on the user's GPUs) are benchmarks too: the same
factor applies to them, unless the profile holds its own (``[[sustained]]``, which ``calibrate``
fits to ``bench train`` steps: :mod:`willitscale.calibrate.profile_fit`).
"""

from __future__ import annotations

from dataclasses import replace

from willitscale.errors import ConfigError

__all__ = ["SUSTAINED", "sustained_factor", "sustained_curves"]

#: architecture -> factor (fitted on fit rows: see the module docstring)
SUSTAINED = {"ampere": 0.850, "hopper": 0.820, "blackwell": 0.820, "cdna3": 0.820}


def sustained_factor(architecture: str) -> float:
    try:
        return SUSTAINED[architecture]
    except KeyError:
        raise ConfigError("GPU architecture (compute/curves.toml)", architecture,
                          "one of " + ", ".join(SUSTAINED)) from None


def sustained_curves(curves, factor: float):
    """``curves`` (:class:`~willitscale.compute.curves.GpuCurves`) with every GEMM and attention
    efficiency times ``factor``."""
    if factor == 1.0:
        return curves
    gemm = {d: replace(c, efficiency=c.efficiency * factor) for d, c in curves.gemm.items()}
    attention = tuple(replace(c, efficiency=c.efficiency * factor) for c in curves.attention)
    return replace(curves, gemm=gemm, attention=attention)
