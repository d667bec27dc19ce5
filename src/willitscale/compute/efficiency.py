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

The per-op compute model (:mod:`willitscale.compute.layer`) is the default whenever the model's
shape is known and the GPU has compute curves (``compute/curves.toml`` or a measured profile):
then there is no efficiency to choose, each operation's time comes from its shape. A flat
efficiency applies only when given (``--hfu``/``--mfu``, which replace the per-op model), when a
calibration holds a measured flat efficiency and no curves, or as the default below when the
per-op model cannot run (``--params`` without a shape, a GPU without curves).

Flat defaults, as **compute-only** HFU (communication is modelled separately):

==========  =====  =========================================================================
dtype       HFU    why
==========  =====  =========================================================================
bf16, fp16  0.50   Megatron-LM on A100 (Narayanan et al. 2021, SC21, table 1): 44-52% of peak
                   end to end, recomputation counted; Bekman's networking chapter uses 50%.
fp8         0.375  the bf16 default sped up as FP8 pretraining was measured against bf16 on
                   the same cluster: 1.50x for Llama 3 70B on 128 H100 with FSDP2 and float8
                   all-gathers (PyTorch dev-discuss, "Enabling float8 all-gather in FSDP2";
                   pytorch.org "Supercharging Training using float8 and FSDP2", Table 1: 956
                   vs 1430 tokens/s per GPU): 0.50 x 1.50 / 2, the FP8 peak being twice bf16's.
other       none   no published basis for a default: give ``--hfu`` or ``--mfu``.
==========  =====  =========================================================================

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
           "resolved_efficiency"]

#: compute-only HFU defaults by compute dtype (sources in the module docstring)
DEFAULT_HFU = {"bf16": 0.5, "fp16": 0.5, "fp8": 0.5 * 1.50 / 2}
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


def resolved_efficiency(scenario, *, per_op: bool) -> Efficiency | None:
    """The flat compute efficiency in force, or None when the per-op model times the step:
    the user's (``--hfu``/``--mfu``), a calibration's measured flat efficiency (an HFU) when it
    has no curves for the per-op model (``per_op`` False), else the default."""
    if scenario.efficiency is not None:
        return scenario.efficiency
    if per_op:
        return None
    calibration = scenario.calibration
    if calibration is not None:
        entry = calibration.compute_for(scenario.dtype)
        value = entry.efficiency if entry is not None else calibration.compute_efficiency
        if value is not None:
            where = getattr(calibration, "path", "") or "the calibration"
            return Efficiency(kind="hfu", value=min(float(value), 1.0), source=f"calibrated, {where}")
    return default_efficiency(scenario.cluster.gpu.name, scenario.dtype)
