"""Published 3D-parallel training runs, as scenarios, to check the estimate against.

Each :class:`PublishedRun` holds a run's model shape, cluster, plan and one published number,
with its source and **which FLOPs the source counts**: Megatron-LM's and BLOOM's "achieved
TFLOP/s" count the FLOPs executed, recomputation included (our ``hardware_tflops_per_gpu``,
HFU); Korthikanti et al. 2022 give both MFU and HFU; Llama 3's "TFLOPs/GPU" and "BF16 MFU" count
model FLOPs (our ``tflops_per_gpu``, MFU); iteration times need no FLOP convention.

Every number was checked against its source (the citations below); shapes not in the catalog
are built here from the paper's own table. The comparison and its tolerance are in
``tests/golden/test_published_runs.py``; the accuracy table in docs/planner.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario
from willitscale.workload.transformer import Transformer

__all__ = ["PublishedRun", "PUBLISHED_RUNS", "predict"]

#: Selene (Narayanan et al. 2021 section 5; Korthikanti et al. 2022 section 6): DGX A100 80GB,
#: NVLink/NVSwitch inside, 8 x 200 Gb/s HDR InfiniBand per node
SELENE = {"preset": "dgx-a100"}


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRun:
    name: str
    source: str  #: paper, table
    metric: str  #: hardware_tflops_per_gpu | tflops_per_gpu | mfu | hfu | step_time_s
    published: float
    shape: dict  #: Transformer fields, or {"catalog": name}
    settings: dict  #: cluster, plan and training settings (willitscale.scenario.settings keys)
    note: str = ""
    calibrated_on: bool = False  #: our default efficiency was chosen looking at this run
    extra: dict = field(default_factory=dict)

    def __repr__(self) -> str:
        return f"PublishedRun({self.name!r}: {self.metric} = {self.published:g}, {self.source[:60]!r})"


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200) -> dict:
    """A GPT-3-style shape (Megatron-LM's GPT: learned positions, LayerNorm, biases, 4h MLP,
    tied head) with the papers' vocabulary of 51,200 and sequence length 2048."""
    return {"name": name, "layers": layers, "hidden": hidden, "heads": heads, "vocab": vocab,
            "max_positions": 2048, "position": "learned", "norm": "layernorm", "bias": True,
            "tied_embeddings": True}


_N21 = ("Narayanan et al. 2021, 'Efficient Large-Scale Language Model Training on GPU Clusters "
        "Using Megatron-LM' (SC21), Table 1 (achieved teraFLOP/s per GPU, recomputation counted); "
        "configurations from NVIDIA/Megatron-LM examples/sc21/run_table_1.sh")
#: (name, layers, hidden, heads, tp, pp, gpus, batch, micro-batch, virtual stages, overlapped DDP,
#:  published TFLOP/s per GPU)
_TABLE_1 = [
    ("1.7B", 24, 2304, 24, 1, 1, 32, 512, 16, 1, True, 137),
    ("3.6B", 30, 3072, 32, 2, 1, 64, 512, 16, 1, True, 138),
    ("7.5B", 36, 4096, 32, 4, 1, 128, 512, 16, 1, True, 142),
    ("18.4B", 40, 6144, 48, 8, 1, 256, 1024, 8, 1, True, 135),
    ("39.1B", 48, 8192, 64, 8, 2, 512, 1536, 4, 1, False, 138),
    ("76.1B", 60, 10240, 80, 8, 4, 1024, 1792, 2, 3, False, 140),
    ("145.6B", 80, 12288, 96, 8, 8, 1536, 2304, 2, 2, False, 148),
    ("310.1B", 96, 16384, 128, 8, 16, 1920, 2160, 1, 2, False, 155),
    ("529.6B", 105, 20480, 128, 8, 35, 2520, 2520, 1, 3, False, 163),
    ("1008B", 128, 25600, 160, 8, 64, 3072, 3072, 1, 1, False, 163),
]


def _narayanan() -> list[PublishedRun]:
    runs = []
    for name, layers, hidden, heads, tp, pp, gpus, batch, mb, v, torch_ddp, tflops in _TABLE_1:
        runs.append(PublishedRun(
            name=f"Megatron-LM GPT {name}", source=_N21, metric="hardware_tflops_per_gpu",
            published=float(tflops), shape=_gpt(f"gpt-{name}", layers, hidden, heads),
            settings={**SELENE, "nodes": gpus // 8, "tp": tp, "pp": pp, "global_batch": batch,
                      "micro_batch": mb, "seq_len": 2048, "recompute": "full", "dtype": "fp16",
                      "pp_schedule": "interleaved" if v > 1 else "1f1b", "virtual_stages": v,
                      "overlap": torch_ddp, "flash_attention": False,
                      # 2021's Megatron-LM had neither sequence parallelism (Korthikanti 2022)
                      # nor the distributed optimizer: stated, so the estimate does not fit them
                      "sequence_parallel": False, "zero": 0},
            note=("PyTorch DDP (overlapped)" if torch_ddp else "Megatron local DDP: gradients "
                  "all-reduced after the flush, not overlapped"),
            calibrated_on=True))
    return runs


_K22 = ("Korthikanti et al. 2022, 'Reducing Activation Recomputation in Large Transformer Models', "
        "Table 3 (configurations) and Table 5 (iteration time, MFU, HFU); no data parallelism")
#: (name, layers, hidden, heads, tp, pp, gpus, global batch, micro-batch, virtual stages,
#:  full-recompute s, present-work s, MFU, HFU); "three interleaving stages for the 175B and
#:  530B models" (section 6)
_TABLE_5 = [
    ("22B", 48, 6144, 64, 8, 1, 8, 4, 4, 1, 1.42, 1.10, 0.415, 0.437),
    ("175B", 96, 12288, 96, 8, 8, 64, 64, 1, 3, 18.13, 13.75, 0.514, 0.528),
    ("530B", 105, 20480, 128, 8, 35, 280, 280, 1, 3, 49.05, 37.83, 0.560, 0.570),
    ("1T", 128, 25600, 160, 8, 64, 512, 512, 1, 1, 94.42, 71.49, 0.563, 0.570),
]


def _korthikanti() -> list[PublishedRun]:
    runs = []
    for name, layers, hidden, heads, tp, pp, gpus, batch, mb, v, full_s, sel_s, mfu, hfu in _TABLE_5:
        base = {**SELENE, "nodes": max(gpus // 8, 1), "tp": tp, "pp": pp, "global_batch": batch,
                "micro_batch": mb, "seq_len": 2048, "dtype": "fp16", "flash_attention": False,
                "pp_schedule": "interleaved" if v > 1 else "1f1b", "virtual_stages": v,
                "gpus_per_node": min(gpus, 8)}
        shape = _gpt(f"gpt-{name}", layers, hidden, heads)
        runs.append(PublishedRun(
            name=f"GPT {name}, selective recompute + sequence parallel", source=_K22, metric="mfu",
            published=mfu, shape=shape,
            settings={**base, "recompute": "selective", "sequence_parallel": True},
            extra={"hfu": hfu, "step_time_s": sel_s}))
        runs.append(PublishedRun(
            name=f"GPT {name}, full recompute", source=_K22, metric="step_time_s",
            published=full_s, shape=shape,
            settings={**base, "recompute": "full", "sequence_parallel": False}))
    runs.append(PublishedRun(
        name="GPT 530B, selective + sequence parallel, 8-way data parallel (2240 GPUs)",
        source=_K22 + "; section 6.3: 39.15 s per iteration, MFU 54.2%", metric="step_time_s",
        published=39.15, shape=_gpt("gpt-530B", 105, 20480, 128),
        settings={**SELENE, "nodes": 280, "tp": 8, "pp": 35, "global_batch": 2240, "micro_batch": 1,
                  "seq_len": 2048, "dtype": "fp16", "flash_attention": False,
                  "pp_schedule": "interleaved", "virtual_stages": 3, "recompute": "selective",
                  "sequence_parallel": True, "overlap": False},
        note="no overlap of the gradient all-reduce (the paper says so)"))
    return runs


def _others() -> list[PublishedRun]:
    bloom = PublishedRun(
        name="BLOOM-176B", metric="hardware_tflops_per_gpu", published=150.0,
        source=("BigScience 2022, bigscience.notion.site 'BigScience 176B Model' ('training "
                "throughput: about 150 TFLOPs'; 384 A100 80GB, one replica on 48 GPUs); plan from "
                "bigscience-workshop/bigscience train/tr11-176B-ml/tr11-176B-ml.slurm (TP 4, PP 12, "
                "MBS 2, GBS 2048, --checkpoint-activations, ZeRO-1 via the bf16 optimizer); Jean Zay: "
                "4 x Omni-Path 100 Gb/s per node (BLOOM paper, arXiv 2211.05100, section 3.4)"),
        shape={"catalog": "bloom-176b"},
        settings={"gpu": "a100-80gb", "gpus_per_node": 8, "inter_node": "4xopa-100", "nodes": 48,
                  "tp": 4, "pp": 12, "global_batch": 2048, "micro_batch": 2, "seq_len": 2048,
                  "recompute": "full", "zero": 1, "flash_attention": False,
                  "sequence_parallel": False},  # Megatron-DeepSpeed 2022: no sequence parallelism
        note="Megatron-DeepSpeed's TFLOP/s formula counts recomputation (x4 forward)")
    mtnlg = PublishedRun(
        name="MT-NLG 530B", metric="step_time_s", published=60.1,
        source=("Smith et al. 2022, 'Using DeepSpeed and Megatron to Train Megatron-Turing NLG "
                "530B', section 2 (TP 8, PP 35, batch 1920, seq 2048, 105 layers, hidden 20480, 128 "
                "heads) and its throughput table: 60.1 s per iteration on 280 DGX A100 (2240 GPUs)"),
        shape=_gpt("mt-nlg-530b", 105, 20480, 128),
        settings={**SELENE, "nodes": 280, "tp": 8, "pp": 35, "global_batch": 1920,
                  "micro_batch": 1, "seq_len": 2048, "recompute": "full", "zero": 1,
                  "flash_attention": False, "sequence_parallel": False},  # not in 2021's code
        note="micro-batch 1 assumed (not published)")
    llama = []
    for gpus, dp, tflops in ((8192, 64, 430.0), (16384, 128, 400.0)):
        llama.append(PublishedRun(
            name=f"Llama 3 405B on {gpus:,} H100", metric="tflops_per_gpu", published=tflops,
            source=("Dubey et al. 2024, 'The Llama 3 Herd of Models', Table 4 (TP 8, CP 1, PP 16, "
                    f"DP {dp}, seq 8192, 16M tokens per batch, {tflops:.0f} TFLOPs/GPU = BF16 MFU "
                    f"{tflops / 989:.0%}); 400 Gb/s per GPU RoCE (section 3.3.1)"),
            shape={"catalog": "llama3-405b"},
            settings={"gpu": "h100-sxm", "gpus_per_node": 8, "inter_node": "8x400Gbps",
                      "nodes": gpus // 8, "tp": 8, "pp": 16, "global_batch": 2048,
                      "micro_batch": 1, "seq_len": 8192, "recompute": "none", "zero": 1,
                      "sequence_parallel": True, "pp_schedule": "interleaved", "virtual_stages": 2},
            note="model FLOPs (MFU basis); 126 layers on 16 stages as 7 + 14 x 8 + 7 (the paper "
                 "removes a layer from the first and last stages); interleaving depth 2, no "
                 "recomputation and micro-batch 1 are our assumptions"))
    return [bloom, mtnlg, *llama]


PUBLISHED_RUNS: tuple[PublishedRun, ...] = tuple(_narayanan() + _korthikanti() + _others())


def predict(run: PublishedRun, **overrides):
    """Our estimate of ``run`` (a :class:`~willitscale.estimation.result.StepEstimate`)."""

    shape = dict(run.shape)
    model = shape.pop("catalog") if "catalog" in shape else Transformer(**shape, source=run.source)
    return estimate(build_scenario({**run.settings, "model": model, **overrides}), allow_oom=True)


def value(estimate, metric: str) -> float:
    return float(estimate.step_time if metric == "step_time_s" else getattr(estimate, metric))
