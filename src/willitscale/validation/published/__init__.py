"""Published training runs: the data (:mod:`.rows`, ``data/*.toml``), the fit/test split rule
(:mod:`.split`) and our prediction of each run (:func:`predict`, :func:`value`).

Every row is cited; docs/validation.md holds the rule, the format and the error tables.
"""

from __future__ import annotations

from willitscale.validation.published.rows import METRICS, PublishedRun, load_runs
from willitscale.validation.published.split import side_by_rule

__all__ = ["METRICS", "PUBLISHED_RUNS", "PublishedRun", "WAVE1_RUNS", "execution_settings",
           "load_runs", "predict", "side_by_rule", "throughput_error", "value"]

#: every row, expressible or not
PUBLISHED_RUNS: tuple[PublishedRun, ...] = load_runs()
#: the goldens of wave 1 (Narayanan 2021, Korthikanti 2022, BLOOM, MT-NLG, Llama 3 8K)
WAVE1_RUNS: tuple[PublishedRun, ...] = tuple(r for r in PUBLISHED_RUNS if r.wave1)


def execution_settings(run: PublishedRun) -> dict:
    """Kernel settings from what the source says about how the run executed (docs/validation.md,
    "From the sources' facts to kernel settings"): the attention kernel (FlashAttention-2 when
    the source names it, PyTorch SDPA or the flash-attn package; FlashAttention v1 is timed as
    FlashAttention-2, having no curve of its own), eager element-wise kernels for IBM's fms-fsdp
    runs without torch.compile (fused otherwise: Megatron-LM, Transformer Engine, the
    flash-attention training code's fused kernels, torch.compile), and the FP8 scaling recipe
    (tensorwise when the source says tensorwise or dynamic, rowwise when it says rowwise, else
    Transformer Engine's delayed scaling)."""
    out: dict = {}
    kernel = run.attention_kernel.lower()
    if any(word in kernel for word in ("flashattention-2", "flashattention v1", "sdpa", "flash-attn")):
        out["attention_kernel"] = "fa2"
    if "fms-fsdp" in run.framework and not run.compiled:
        out["fusion"] = "eager"
    recipe = run.fp8_recipe.lower()
    if run.dtype == "fp8":
        out["fp8_recipe"] = ("rowwise" if "rowwise" in recipe else
                             "tensorwise" if ("tensorwise" in recipe or "dynamic" in recipe)
                             else "delayed")
    return out


def predict(run: PublishedRun, **overrides):
    """Our estimate of ``run`` (a :class:`~willitscale.estimation.result.StepEstimate`)."""
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario
    from willitscale.workload.transformer import Transformer

    if run.settings is None:
        raise ValueError(f"{run.id} is not expressible: {run.not_expressible}")
    shape = dict(run.shape)
    model = shape.pop("catalog") if "catalog" in shape else Transformer(**shape, source=run.source)
    settings = {**run.settings, **execution_settings(run), "model": model, **overrides}
    return estimate(build_scenario(settings), allow_oom=True)


def value(estimate, metric: str) -> float:
    """The number ``metric`` names, from an estimate."""
    if metric == "step_time_s":
        return float(estimate.step_time)
    if metric == "tokens_per_s_total":
        return float(estimate.tokens_per_s)
    if metric == "tokens_per_s_per_gpu":
        return float(estimate.tokens_per_s / estimate.gpus)
    return float(getattr(estimate, metric))


def throughput_error(metric: str, published: float, predicted: float) -> float:
    """Relative throughput error, ``ours / published - 1``; for a step time
    ``published / ours - 1`` (a prediction 10% too slow is -9%)."""
    if metric == "step_time_s":
        return published / predicted - 1
    return predicted / published - 1
