"""Published training configurations against the memory model (issue 11, Must 2).

The rows, each cited, are ``willitscale/validation/data/memory_runs.toml`` (docs/memory.md,
"Published runs", shows the table): 52 configurations that ran and 5 that ran out of memory.
Every row is a test row: the constants of willitscale.memory were chosen on other sources
(validation/data/allocator.toml, committed with its rule before these comparisons).
"""

import pytest

from willitscale.validation.memory_runs import judge, memory_runs

RUNS = memory_runs()
WORKING = [r for r in RUNS if r.ran]
OOM = [r for r in RUNS if not r.ran]
MEASURED = [r for r in WORKING if r.measured is not None]

#: nvidia-smi readings over-predicted by more than 10%: the model reads nvidia-smi as 1.5 x
#: PyTorch's allocated peak (the caching allocator's reserve, median of the fit rows:
#: llama-recipes FSDP runs) + context + NCCL, and these Megatron-DeepSpeed runs reserved less
#: (~1.2x of the allocated peak we predict). Known, reported, not tuned away: each must keep
#: failing until the model explains it (strict). The ZeRO-0 row joined the set when its step
#: temporaries were corrected (FP16_Optimizer's 8 B/param, memory.buffers): it had passed at
#: +0.1% only because 4 B/param were missing; the 02-17 bf16 DP=2 row left it when it was
#: judged as the ZeRO-1 optimizer it ran (the BF16 optimizer came on 02-28).
OVER_PREDICTED = {
    "bloom-search-20b-1node-fp16", "bloom-search-181b-zero0-dp4-pp12",
    "bloom-search-181b-dp8-pp6-mbs4", "bloom-search-181b-zero1-dp4-pp12",
    "bloom-search-181b-tp2-pp12", "bloom-search-177b-tp1-pp48",
    "bloom-search-176b-bf16opt-mbs2", "bloom-search-176b-bf16opt-tp8-dp4", "bloom-176b-final",
}


def test_the_data_are_as_researched():
    # 52 working configurations (14 refused by main at 69473e3) and 5 published OOMs
    assert len(WORKING) == 52 and len(OOM) == 5
    assert sum(r.refused_before for r in WORKING) == 14
    assert all(r.source and r.quote for r in RUNS)
    assert len(MEASURED) == 19  # 13 BigScience nvidia-smi readings + seed 003's six peaks


@pytest.mark.parametrize("run", WORKING, ids=[r.id for r in WORKING])
def test_no_published_working_configuration_is_refused(run):
    j = judge(run)
    assert j.verdict in ("fits", "tight"), (j.verdict, j.need / 2**30, j.knobs)


@pytest.mark.parametrize("run", OOM, ids=[r.id for r in OOM])
def test_published_out_of_memory_runs_are_refused_or_tight(run):
    j = judge(run)
    assert j.verdict in ("does not fit", "tight"), (j.verdict, j.need / 2**30)


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(
    strict=True, reason="nvidia-smi over-predicted (allocator reserve ratio), see OVER_PREDICTED"))
    if r.id in OVER_PREDICTED else r for r in MEASURED], ids=[r.id for r in MEASURED])
def test_measured_memory_within_10_percent(run):
    j = judge(run)
    assert abs(j.error) < 0.10, f"{100 * j.error:+.1f}%"


def test_error_summary_by_hand():
    # errors +0.2, -0.1, +0.05 and one unmeasured row: mean |e| 0.35/3, median 0.1,
    # worst +0.2, bias 0.15/3; within 10% (strictly below): only 0.05
    from types import SimpleNamespace

    from willitscale.validation.memory_runs import error_summary

    rows = [SimpleNamespace(error=e) for e in (0.2, -0.1, 0.05, None)]
    s = error_summary(rows)
    assert s.rows == 3 and s.within_10 == 1
    assert s.mean_abs == pytest.approx(0.35 / 3) and s.median_abs == pytest.approx(0.1)
    assert s.worst == 0.2 and s.bias == pytest.approx(0.15 / 3)
