"""Efficiency knobs of the estimate and their documented defaults.

:class:`Efficiency` is the compute efficiency (HFU or MFU, see :mod:`willitscale.plan.compute`)
the user gave or the default applied, with where it came from; :func:`default_efficiency` is
the table of defaults. A calibration (fitted to measurements on the user's cluster) replaces
both the compute efficiency and the overlap slowdown below.

Defaults, as **compute-only** HFU (communication is modelled separately, so these are higher
than end-to-end figures measured with communication included):

==========  =====  =========================================================================
dtype       HFU    why
==========  =====  =========================================================================
bf16, fp16  0.50   Megatron-LM on A100 (Narayanan et al. 2021, SC21, table 1): 44-52% of peak
                   end to end, recomputation counted; the handbook chapter (seeds/000) uses 50%.
                   Llama 3 (Dubey et al. 2024, table 4): 38-43% BF16 MFU on 16K H100s end to
                   end, communication included, so compute alone is higher.
fp8         0.25   Llama 4 (Meta AI blog, April 2025): 390 TFLOP/s per H100 in FP8 end to end,
                   ~20% of the 1,979 TFLOP/s dense FP8 peak; compute alone a little higher.
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

from willitscale.errors import ConfigError

__all__ = ["DEFAULT_HFU", "DEFAULT_OVERLAP_SLOWDOWN", "Efficiency", "default_efficiency",
           "resolved_efficiency", "roofline_applies"]

#: compute-only HFU defaults by compute dtype (sources in the module docstring)
DEFAULT_HFU = {"bf16": 0.5, "fp16": 0.5, "fp8": 0.25}
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
        from willitscale.plan.kernels import GEMM_EFFICIENCY

        return Efficiency(kind="hfu", value=GEMM_EFFICIENCY,
                          source="default with a model shape: matmuls at this fraction of peak, "
                                 "element-wise operations at the GPU's memory bandwidth "
                                 "(willitscale.plan.kernels, docs/planner.md)")
    return default_efficiency(scenario.cluster.gpu.name, scenario.dtype)


def roofline_applies(scenario) -> bool:
    """The two-term compute model (:mod:`willitscale.plan.kernels`) is the default when nothing
    else fixes the efficiency, the model's shape is known and the dtype is bf16/fp16."""
    return (scenario.efficiency is None and scenario.calibration is None
            and scenario.model is not None and scenario.dtype in ("bf16", "fp16"))
