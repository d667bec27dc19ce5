"""Published training configurations against the memory model (issue 11, Must 2).

The rows, each cited, are ``willitscale/validation/data/memory_runs.toml`` (docs/memory.md,
"Published runs", shows the table): 52 configurations that ran and 5 that ran out of memory.
Every row is a test row: the constants of willitscale.memory were chosen on other sources
(validation/data/allocator.toml and deepspeed_reserve.toml, each committed with its rule before
its constant was chosen).
"""

import pytest

from willitscale.validation.memory_runs import judge, memory_runs

RUNS = memory_runs()
WORKING = [r for r in RUNS if r.ran]
OOM = [r for r in RUNS if not r.ran]
MEASURED = [r for r in WORKING if r.measured is not None]

#: nvidia-smi readings off by more than 10%. nvidia-smi is predicted as the allocator's reserve x
#: PyTorch's allocated peak + context + NCCL, the reserve of DeepSpeed's engine at ZeRO 0-2 fitted
#: on its own rows (DEEPSPEED_RESERVED_RATIO = 1.161, validation/data/deepspeed_reserve.toml), NCCL
#: counting DeepSpeed's pipeline-engine communicators (memory.device.deepspeed_pipeline_groups)
#: and Megatron's own (memory.device.megatron_groups: the world group, and Megatron-DeepSpeed's
#: mpu data-parallel and pipeline groups on tensor rank 0, the GPU with the most; the pages read
#: "max memory used by the first (last) nodes", which hold tensor rank 0 of the first stage).
#: bloom-search-200b-20nodes-bf16 (dp 2) reads 1.34 x our allocated peak after context and NCCL
#: (the other twelve 1.04-1.24): -11.4%. Megatron's communicators took it from -13.2% to -9.6%;
#: the pipeline's reduce bucket, which DeepSpeed allocates only after a stage's last backward
#: (memory.buffers), takes 0.8 GiB off its peak again (at dp 2 its step's fp32 partition is
#: about as large as its activations). Known, reported, not tuned away: strict.
#: bloom-search-181b-tp2-pp12, +11.6% between those two changes, is at +9.8%.
OVER_PREDICTED: set[str] = set()
UNDER_PREDICTED = {"bloom-search-200b-20nodes-bf16"}

#: published out-of-memory runs the model judges "fits": the BF16-optimizer 206B run (82 layers,
#: hidden 14,336, 128 heads; tp 4, pp 12, dp 8, mbs 2) needs 59.2 GiB (allocated + context +
#: NCCL) and would show about 67.4 GiB on nvidia-smi; its working sibling with 70 layers
#: (bloom-search-176b-bf16opt-mbs2) measured 57.6 GiB and is predicted at +2.9%, and the same
#: page's 176B with 128 heads read 60 GB. Checked and not the cause: the BF16 optimizer as it
#: was on 02-28 (DeepSpeed @1529313, "Fix gradient clipping": fp32 partition, whole fp32
#: gradient buffer, per-tensor fp32 casts only), the pipeline partition (82 + 2 = 12 x 7 is the
#: 'type:transformer|embedding' split; Megatron-DeepSpeed's default before @00f5f88 was
#: 'type:transformer', which would put one more layer on the first stage of both runs alike).
#: No mechanism found: strict xfail.
OOM_JUDGED_FITS = {"oom-bloom-206b-dp8-tp4-pp12"}


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


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(
    strict=True, reason="published OOM judged fits, see OOM_JUDGED_FITS"))
    if r.id in OOM_JUDGED_FITS else r for r in OOM], ids=[r.id for r in OOM])
def test_published_out_of_memory_runs_are_refused_or_tight(run):
    j = judge(run)
    assert j.verdict in ("does not fit", "tight"), (j.verdict, j.need / 2**30)


@pytest.mark.parametrize("run", [pytest.param(r, marks=pytest.mark.xfail(
    strict=True, reason="nvidia-smi off by more than 10%, see OVER_PREDICTED / UNDER_PREDICTED"))
    if r.id in OVER_PREDICTED | UNDER_PREDICTED else r for r in MEASURED],
    ids=[r.id for r in MEASURED])
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
