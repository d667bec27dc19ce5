"""Reproduction of "The Impact of GPU Networking (Part 1)" (Tomas, 2025): DDP epoch times.

The article trained GPT-2 and GPT-2 Large (minGPT through lightning-GPT, 16 samples of 128
characters per GPU, bf16 autocast) on Baskerville (4x A100 per node, NVLink 3, one InfiniBand
HDR port) and measured the second epoch:

=========  =====  ============  =========  =============
model      nodes  GPUs/node     steps      epoch (s)
=========  =====  ============  =========  =============
gpt2       1      1             2,216      157.60
gpt2       1      2             1,108       62.96
gpt2       2      1             1,108       62.55
gpt2-large 1      1             2,216      498.37
gpt2-large 1      2             1,108      266.83
gpt2-large 2      1             1,108      406.12
=========  =====  ============  =========  =============

Calibration input: the single-GPU epoch gives the time of one step with the same per-GPU batch
(``epoch / 2216``); each two-GPU row is predicted as ``1108 x step`` under three communication
assumptions: the catalog's links (``defaults``), the article's measured all-reduce of 1.32 GiB
(0.02 s over NVLink, 0.12 s over HDR: ``measured``), and the Baskerville preset whose HDR
efficiency was fitted to that same measurement (``calibrated``).
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario
from willitscale.workload.transformer import Transformer

__all__ = ["MEASURED_EPOCH_S", "Seed003Row", "seed003_rows", "seed003_model"]

#: 'The Impact of GPU Networking (Part 1)' tables "GPT-2 Experiments" and "GPT-2 Large Experiments": epoch 2 time in seconds
MEASURED_EPOCH_S = {
    ("gpt2", 1, 1): 157.60, ("gpt2", 1, 2): 62.96, ("gpt2", 2, 1): 62.55,
    ("gpt2-large", 1, 1): 498.37, ("gpt2-large", 1, 2): 266.83, ("gpt2-large", 2, 1): 406.12,
}
SINGLE_GPU_STEPS, TWO_GPU_STEPS = 2216, 1108  # "Single GPU: 2,216 steps; Two GPUs: 1,108 steps"
#: e-16: NCCL all-reduce of "700M parameters in BF16 (~1.32 GB)": GPT-2 Large's 708.7M values
#: x 2 bytes = 1.417e9 bytes = 1.320 GiB, so the "GB" are GiB. The table's time column rounds
#: to 10 ms ("0.02", "0.12"); its speed column is 2 x 1.32 / t (the article's "two transfers"),
#: so t = 2 x 1.32 / 159.29 = 0.01657 s over NVLink and 2 x 1.32 / 21.67 = 0.1218 s over HDR.
MEASURED_ALLREDUCE = {"nvlink": 2 * 1.32 / 159.29, "hdr": 2 * 1.32 / 21.67}
MEASURED_ALLREDUCE_BYTES = 1.32 * 2**30

_SHAPES = {"gpt2": (12, 768, 12), "gpt2-large": (36, 1280, 20)}  # layers, hidden, heads


def seed003_model(name: str):
    """The model 'The Impact of GPU Networking (Part 1)' trained: minGPT's GPT-2 shape (untied ``lm_head``) on the
    tinyshakespeare characters of lightning-GPT's ``train.py`` (vocabulary 65, ``block_size``
    128). Also in ``examples/models/mingpt-*-char.toml``."""

    layers, hidden, heads = _SHAPES[name]
    return Transformer(name=f"mingpt-{name}-char", layers=layers, hidden=hidden, heads=heads,
                       vocab=65, max_positions=128, position="learned", norm="layernorm",
                       bias=True, tied_embeddings=False,
                       source="'The Impact of GPU Networking (Part 1)'; github.com/karpathy/minGPT; lightning-GPT train.py")


@dataclass(frozen=True, slots=True, kw_only=True)
class Seed003Row:
    model: str
    nodes: int
    gpus_per_node: int
    assumptions: str  #: defaults | measured | calibrated
    predicted_s: float  #: epoch
    measured_s: float
    comms_s: float  #: per step
    exposed_s: float  #: per step

    @property
    def error(self) -> float:
        """(predicted - measured) / measured."""
        return (self.predicted_s - self.measured_s) / self.measured_s

    def to_json(self) -> dict:
        return {"model": self.model, "nodes": self.nodes, "gpus_per_node": self.gpus_per_node,
                "assumptions": self.assumptions, "predicted_epoch_s": self.predicted_s,
                "measured_epoch_s": self.measured_s, "error": self.error,
                "comms_per_step_s": self.comms_s, "exposed_per_step_s": self.exposed_s}


def _settings(model: str, nodes: int, gpus_per_node: int, assumptions: str) -> dict:
    settings = {
        "model": seed003_model(model), "preset": "baskerville", "nodes": nodes,
        "gpus_per_node": gpus_per_node, "seq_len": 128, "micro_batch": 16,
        "grad_reduce_dtype": "fp32",  # bf16 autocast keeps fp32 parameters, so fp32 gradients
        # minGPT's configure_optimizers builds torch.optim.AdamW without fused=True: the foreach
        # implementation, 80 B/param; it is inside the measured single-GPU step and, with DDP,
        # runs after the last all-reduce
        "optimizer": "adamw-foreach", "flash_attention": False,  # minGPT: explicit attention
        "step_time_one_gpu": MEASURED_EPOCH_S[(model, 1, 1)] / SINGLE_GPU_STEPS,
    }
    if assumptions == "defaults":
        settings["inter_node"] = "ib-hdr"  # the catalog's HDR port instead of the fitted one
    elif assumptions == "measured":
        link = "hdr" if nodes > 1 else "nvlink"
        settings["allreduce_time"] = MEASURED_ALLREDUCE[link]
        settings["allreduce_size"] = MEASURED_ALLREDUCE_BYTES
    return settings


def seed003_rows() -> list[Seed003Row]:
    """Predicted vs measured epoch time of every two-GPU run, under each assumption set."""

    rows = []
    for model in ("gpt2-large", "gpt2"):
        for nodes, gpn in ((1, 2), (2, 1)):
            for assumptions in ("defaults", "measured", "calibrated"):
                est = estimate(build_scenario(_settings(model, nodes, gpn, assumptions)))
                rows.append(Seed003Row(
                    model=model, nodes=nodes, gpus_per_node=gpn, assumptions=assumptions,
                    predicted_s=TWO_GPU_STEPS * est.step_time,
                    measured_s=MEASURED_EPOCH_S[(model, nodes, gpn)],
                    comms_s=est.comms, exposed_s=est.exposed_comms))
    return rows
