"""The literature's shortcut FLOP formulas, as named approximations of :mod:`.flops`.

Each returns **training** FLOPs (forward + backward [+ recomputation]). They ignore some
matmuls (6PD ignores attention scores; all ignore GQA and gated MLPs unless noted), and the
tests measure how far each lands from the exact count (GPT-3 175B: within 3%).

* ``6PD`` — Kaplan et al. 2020, "Scaling Laws for Neural Language Models", section 2.1:
  ``C ≈ 6 N`` per token (2N forward, 4N backward), N = non-embedding parameters. The article
  of Ray's 'Will it scale to N GPUs?' uses P = all parameters.
* ``8PD`` — the same with full recomputation (one more forward): Bekman's networking chapter's "4 instead of 3".
* Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters Using
  Megatron-LM", appendix: ``96 B s l h^2 (1 + s/(6h) + V/(16 l h))`` per iteration with full
  recomputation (BLOOM's math docs use it); Korthikanti et al. 2022, appendix A, give the model
  FLOPs without recomputation, ``72 B s l h^2 (1 + s/(6h) + V/(12 l h))``.
* PaLM (Chowdhery et al. 2022, appendix B): ``6 N + 12 L H Q T`` per token, N = all
  parameters (PaLM's input embedding is also its output layer).
* The handbook (Bekman's networking chapter, after BLOOM's docs): ``tflop = model_size_in_B * 4 * 2 * seqlen *
  global_batch_size / (total_gpus * 1e3)``, i.e. 8PD in TFLOP per GPU (3 instead of 4 without
  recomputation).
"""

from __future__ import annotations

import numpy as np

from willitscale.workload.arrays import float_or_array
from willitscale.workload.params import param_count
from willitscale.workload.transformer import Transformer

__all__ = [
    "kaplan_6pd",
    "recompute_8pd",
    "narayanan_flops",
    "korthikanti_model_flops",
    "palm_flops_per_token",
    "handbook_tflop_per_gpu",
    "approximate_flops_per_token",
    "APPROXIMATION_LABELS",
]


def kaplan_6pd(params, tokens):
    """``6 P D``: training FLOPs of ``tokens`` tokens through ``params`` parameters (Kaplan 2020)."""
    return float_or_array(6.0 * np.asarray(params, dtype=float) * np.asarray(tokens, dtype=float))


def recompute_8pd(params, tokens):
    """``8 P D``: 6PD plus one more forward for full activation recomputation (Bekman's networking chapter)."""
    return float_or_array(8.0 * np.asarray(params, dtype=float) * np.asarray(tokens, dtype=float))


def narayanan_flops(batch, seq_len, layers, hidden, vocab):
    """``96 B s l h^2 (1 + s/(6h) + V/(16 l h))``: FLOPs per iteration with full recomputation
    (Narayanan et al. 2021, appendix; GPT with a 4h MLP and multi-head attention)."""
    s, h = np.asarray(seq_len, dtype=float), float(hidden)
    return float_or_array(96.0 * batch * s * layers * h**2 * (1 + s / (6 * h) + vocab / (16 * layers * h)))


def korthikanti_model_flops(batch, seq_len, layers, hidden, vocab):
    """``72 B s l h^2 (1 + s/(6h) + V/(12 l h))``: model FLOPs per iteration, no recomputation
    (Korthikanti et al. 2022, appendix A)."""
    s, h = np.asarray(seq_len, dtype=float), float(hidden)
    return float_or_array(72.0 * batch * s * layers * h**2 * (1 + s / (6 * h) + vocab / (12 * layers * h)))


def palm_flops_per_token(params_non_embedding, layers, heads, head_dim, seq_len):
    """``6 N + 12 L H Q T``: training FLOPs per token (PaLM, Chowdhery et al. 2022, appendix B)."""
    return float_or_array(6.0 * params_non_embedding + 12.0 * layers * heads * head_dim * np.asarray(seq_len, dtype=float))


def handbook_tflop_per_gpu(model_size_in_B, seqlen, global_batch_size, total_gpus, *, recompute: bool = True):
    """The handbook's ``model_size_in_B * 4 * 2 * seqlen * global_batch_size / (total_gpus * 1e3)``:
    TFLOP each GPU computes per iteration (Bekman's networking chapter; 3 instead of 4 without recomputation)."""
    passes = 4 if recompute else 3
    return model_size_in_B * passes * 2 * seqlen * global_batch_size / (total_gpus * 1e3)


APPROXIMATION_LABELS = {
    "kaplan_6p": "6P (Kaplan 2020; 'Will it scale to N GPUs?')",
    "kaplan_6n": "6N (Kaplan 2020, N = non-embedding)",
    "handbook_8p_full_recompute": "8P (the handbook, Bekman; full recompute)",
    "palm_6n_12lhqt": "6N + 12LHQT (PaLM)",
    "korthikanti_72lh2": "72lh^2(1+s/6h+V/12lh) (Korthikanti 2022)",
    "narayanan_96lh2_full_recompute": "96lh^2(1+s/6h+V/16lh) (Narayanan 2021, full recompute)",
}


def approximate_flops_per_token(model: Transformer, seq_len=None) -> dict[str, object]:
    """Every shortcut, as training FLOPs per token of ``model`` (for side-by-side reports).

    P and N are the parameters a token passes through: all of them for a dense model, the
    active ones for MoE. The Narayanan and Korthikanti formulas assume GPT's shape (4h MLP,
    multi-head attention, tied head): they drift for gated MLPs, GQA and MoE.
    """
    s = model.seq_len if seq_len is None else seq_len
    p = param_count(model)
    l, h, v = model.layers, model.hidden, model.vocab
    per_token = np.asarray(s, dtype=float)
    return {
        "kaplan_6p": 6.0 * p.active,
        "kaplan_6n": 6.0 * p.active_non_embedding,
        "handbook_8p_full_recompute": 8.0 * p.active,
        "palm_6n_12lhqt": palm_flops_per_token(p.active, l, model.heads, model.head_dim, s),
        "korthikanti_72lh2": float_or_array(korthikanti_model_flops(1, s, l, h, v) / per_token),
        "narayanan_96lh2_full_recompute": float_or_array(narayanan_flops(1, s, l, h, v) / per_token),
    }
