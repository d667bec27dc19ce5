"""Efficiency knobs of the estimate and their documented defaults.

Two standard ways to say how fast a GPU computes, never to be mixed up:

* **HFU** (hardware FLOPs utilisation): the fraction of the GPU's dense peak achieved on the
  FLOPs actually *executed*, recomputation included: ``compute = executed / (hfu x peak)``.
* **MFU** (model FLOPs utilisation, PaLM, Chowdhery et al. 2022, appendix B): the fraction of
  peak counting only the *model's* FLOPs (forward + backward, no recomputation), so
  recomputation never changes the time an MFU implies: ``compute = model / (mfu x peak)``.
  The two are related by ``hfu = mfu x executed / model``.

An estimate's reported ``mfu`` is always ``model_flops / (step_time x peak)`` and its ``hfu``
``executed_flops / (step_time x peak)``: whole-step figures, lower than a compute-only
efficiency given as input whenever communication, data loading or the optimizer adds time.

:class:`Efficiency` is the compute efficiency the user gave or the default applied, with where
it came from; :func:`default_efficiency` is the table of defaults. A calibration (fitted to measurements on the user's cluster) replaces
both the compute efficiency and the overlap slowdown below.

Defaults, as **compute-only** HFU (communication is modelled separately, so these are higher
than end-to-end figures measured with communication included):

==========  =====  =========================================================================
dtype       HFU    why
==========  =====  =========================================================================
bf16, fp16  0.50   Megatron-LM on A100 (Narayanan et al. 2021, SC21, table 1): 44-52% of peak
                   end to end, recomputation counted; Bekman's networking chapter uses 50%.
                   Llama 3 (Dubey et al. 2024, table 4): 38-43% BF16 MFU on 16K H100s end to
                   end, communication included, so compute alone is higher.
fp8         0.40   NVIDIA NeMo performance summaries, FP8 pretraining on DGX H100, model
                   TFLOP/s per GPU end to end: GPT-3 175B on 512 GPUs 888 (NeMo 24.12) and
                   932 (25.02), 45-47% of the 1,979 TFLOP/s dense FP8 peak; Llama 2 7B on 8
                   GPUs 780 (39%), Llama 3 70B on 64 GPUs 734 (37%) (NeMo 24.12). Compute
                   alone is higher than these end-to-end figures; 0.40 is their middle, so
                   an FP8 step computes 1.6x faster than with the bf16 default (0.40 x 1,979
                   vs 0.50 x 989 TFLOP/s): FP8 speeds up the GEMMs only. Llama 4's
                   390 TFLOP/s (~20%, Meta, April 2025) was a mixture of experts with heavy
                   all-to-all traffic, not a compute-only figure: the previous default 0.25
                   made FP8 exactly as fast as bf16 (0.25 x 1,979 = 0.50 x 989).
other       none   no published basis for a default: give ``--hfu`` or ``--mfu``.
==========  =====  =========================================================================

The same default applies to every GPU; a per-GPU value comes from a calibration.

Overlap slowdown: while NCCL kernels run, they occupy SMs and memory bandwidth, so compute that
overlaps communication runs slower. "Characterizing Compute-Communication Overlap in
GPU-Accelerated Distributed Deep Learning" (arXiv 2507.03114, 2025) measured an average
**18.9%** slowdown of compute kernels overlapped with communication (maximum 40%) on A100,
H100, MI250 and MI210 for GPT and Llama training. Default ``overlap_slowdown = 0.19``: each
second of communication hidden under compute costs 0.19 s of compute.
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.compute import kernels
from willitscale.errors import ConfigError

__all__ = ["DEFAULT_HFU", "DEFAULT_OVERLAP_SLOWDOWN", "Efficiency", "default_efficiency",
           "resolved_efficiency", "roofline_applies"]

#: compute-only HFU defaults by compute dtype (sources in the module docstring)
DEFAULT_HFU = {"bf16": 0.5, "fp16": 0.5, "fp8": 0.40}
#: arXiv 2507.03114: compute overlapped with communication is 18.9% slower on average.
DEFAULT_OVERLAP_SLOWDOWN = 0.19


@dataclass(frozen=True, slots=True, kw_only=True)
class Efficiency:
    """A compute efficiency: ``kind`` (``hfu`` or ``mfu``), its ``value`` and ``source``."""

    kind: str
    value: float
    source: str = ""

    def __post_init__(self) -> None:
        if self.kind not in ("hfu", "mfu"):
            raise ConfigError("efficiency kind", self.kind, "hfu or mfu")
        if not 0 < self.value <= 1:
            raise ConfigError(f"--{self.kind}", self.value, "a fraction in (0, 1]")

    def describe(self) -> str:
        return f"{self.kind.upper()} {self.value:g} ({self.source})" if self.source else \
            f"{self.kind.upper()} {self.value:g}"


def default_efficiency(gpu_name: str, dtype: str) -> Efficiency:
    """The documented default compute efficiency for ``dtype`` on ``gpu_name``."""
    try:
        value = DEFAULT_HFU[dtype]
    except KeyError:
        raise ConfigError(
            f"no default compute efficiency for dtype {dtype!r} (defaults exist for "
            f"{', '.join(DEFAULT_HFU)}): give --hfu or --mfu"
        ) from None
    return Efficiency(kind="hfu", value=value,
                      source=f"default for {dtype} on {gpu_name}, see docs/estimate.md")


def resolved_efficiency(scenario) -> Efficiency:
    """The compute efficiency in force: the user's, a calibration's (an HFU), or the default."""
    if scenario.efficiency is not None:
        return scenario.efficiency
    calibration = scenario.calibration
    if calibration is not None:
        entry = calibration.compute_for(scenario.dtype)
        value = entry.efficiency if entry is not None else calibration.compute_efficiency
        if value is not None:
            where = getattr(calibration, "path", "") or "the calibration"
            return Efficiency(kind="hfu", value=min(float(value), 1.0), source=f"calibrated, {where}")
    if roofline_applies(scenario):
        return Efficiency(kind="hfu", value=kernels.GEMM_EFFICIENCY,
                          source="default with a model shape: matmuls at this fraction of peak, "
                                 "element-wise operations at the GPU's memory bandwidth "
                                 "(willitscale.compute.kernels, docs/planner.md)")
    return default_efficiency(scenario.cluster.gpu.name, scenario.dtype)


def roofline_applies(scenario) -> bool:
    """The two-term compute model (:mod:`willitscale.compute.kernels`) is the default when nothing
    else fixes the efficiency, the model's shape is known and the dtype is bf16/fp16."""
    return (scenario.efficiency is None and scenario.calibration is None
            and scenario.model is not None and scenario.dtype in ("bf16", "fp16"))
