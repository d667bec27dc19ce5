"""Step time and peak memory of one ``bench train`` step on one GPU, from a measured profile's
curves (pure). This is the predictor ``validate --profile --steps`` checks against measured
steps (:mod:`willitscale.calibrate.measured_steps`).

A stand-in, written for the benchmark's own models (:mod:`willitscale.bench.gpt`,
:mod:`willitscale.bench.llama`, bf16 autocast, AdamW with torch's default ``foreach``
implementation, SDPA causal attention); when the compute and memory models of issue 10 read the
same profile, this module should ask them instead. Per step, with ``T = b s`` tokens:

* **GEMMs** (:func:`~willitscale.calibrate.measured_curves.gemm_time`, the profile's ``[[gemm]]``
  of the dtype): per layer the q/k/v, attention-output and MLP projections, and the LM head,
  ``(T, N, K)`` each; backward two per forward GEMM, data gradient ``(T, K, N)`` and weight
  gradient ``(N, K, T)``.
* **Attention** (``[[attention]]``, the kernel named by ``kernel``, causal, the model's head
  dim): forward and backward, per layer.
* **Memory-bound work** over the ``[[memory]]`` bandwidth, bytes counted in
  :data:`FORWARD_BYTES_PER_TOKEN_HIDDEN` etc. (the residual stream is fp32 under autocast,
  matmul inputs and outputs bf16), plus the fixed cost of each kernel launched
  (:data:`KERNELS_PER_LAYER`).
* **Fitted on the fit rows** (GPT-2 small steps): ``step_overhead`` (seconds each step spends
  outside these kernels: Python, DDP's hooks, launch gaps), ``memory_scale`` (what multiplies
  the activation part of the peak below to give the measured peak) and ``reserved_ratio``
  (reserved over allocated).

Peak allocated memory comes from the project's memory model (:mod:`willitscale.memory`, docs/
memory.md) for the benchmark's setup -- framework ``ddp`` with ``gradient_as_bucket_view``,
foreach AdamW, FlashAttention-class SDPA, bf16 autocast, one GPU: the state (fp32 weights,
gradients, AdamW's moments), cuBLAS's workspace and autocast's 16-bit weight copies, counted
exactly and never scaled, plus ``memory_scale`` x the activation part: the activations the
forward keeps, and the logits' gradient at the start of the backward (fp32 and its bf16 cast,
6 B per logit), a transient the memory model leaves out (docs/memory.md: its validated rows have
a 65-character vocabulary; GPT-2's 50,257 and Llama 3's 128,256 make it gigabytes). The scale
stands for what the count leaves out and grows with the activations, not the state.
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.calibrate.measured_curves import attention_time, gemm_time, memory_time
from willitscale.errors import ConfigError
from willitscale.hardware.calibration import Calibration
from willitscale.results.kernel_records import attention_flops
from willitscale.workload.params import param_count
from willitscale.workload.transformer import Transformer

__all__ = ["StepPrediction", "StepConstants", "predict_step", "raw_step", "KERNEL_PREFERENCE"]

#: forward bytes per token per hidden unit of one layer under bf16 autocast: norm 1 (fp32 in,
#: fp32 out: 8) and its bf16 cast (6), residual add (fp32 + bf16 -> fp32: 10), norm 2 and cast
#: (14), residual add (10)
FORWARD_BYTES_PER_TOKEN_HIDDEN = 48
#: the MLP's activation (GELU, or SiLU x up for SwiGLU) per FFN unit: bf16 in, bf16 out (4);
#: gated: two inputs (6)
ACTIVATION_BYTES = {False: 4, True: 6}
BACKWARD_BYTES_FACTOR = 2.0  #: a gradient pass reads the saved input and the incoming gradient
#: the fp32 weight -> bf16 cast per forward (read 4, write 2) and the bf16 weight gradient
#: accumulated into the fp32 gradient per backward (read 2 + 4, write 4)
WEIGHT_BYTES_PER_PARAM = 6 + 10
#: cross-entropy over the logits in fp32 under autocast: cast (2 + 4), log-softmax (4 + 4),
#: its gradient (4 + 4) and the cast back (4 + 2), per logit
LOGIT_BYTES = 28
#: AdamW, torch's foreach implementation: lerp of the first moment (12 B), the second moment's
#: mul and addcmul (20), the denominator's sqrt and add (16), weight decay (8), addcdiv into the
#: parameter (16): 72 bytes per fp32 parameter
OPTIMIZER_BYTES_PER_PARAM = 72
#: kernels one layer launches forward (norms, casts, GEMMs, attention, activation, adds) and
#: backward (about twice as many), for the fixed cost per kernel
KERNELS_PER_LAYER = {"forward": 16, "backward": 32}
LOGIT_GRAD_BYTES = 4 + 2  #: the logits' fp32 gradient and its bf16 cast
#: which attention curve stands for SDPA's default choice, first found wins
KERNEL_PREFERENCE = ("fa2", "cudnn", "mem-efficient", "fa3")
AUTOCAST_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32"}


@dataclass(frozen=True, slots=True, kw_only=True)
class StepConstants:
    """What the fit rows set (module docstring); the identity before fitting."""

    step_overhead: float = 0.0
    memory_scale: float = 1.0
    reserved_ratio: float = 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class StepPrediction:
    step: float  #: seconds
    gemm: float
    attention: float
    memory_bound: float
    overhead: float
    peak_allocated: float  #: bytes
    peak_reserved: float
    peak_state: float  #: the part of peak_allocated that is state (never scaled)


def _gemms(shape: Transformer, tokens: int) -> list[tuple[int, int, int]]:
    """Forward GEMMs ``(m, n, k)`` of the whole model (the LM head included)."""
    h, q, kv, f = shape.hidden, shape.q_dim, shape.kv_dim, shape.ffn_hidden
    per_layer = [(tokens, q + 2 * kv, h), (tokens, h, q),
                 (tokens, (2 if shape.gated_mlp else 1) * f, h), (tokens, h, f)]
    return per_layer * shape.layers + [(tokens, shape.vocab, h)]


def _curve(cal: Calibration, section: str, match) -> object:
    for entry in cal.section(section):
        if match(entry):
            return entry
    return None


def _attention_curve(cal: Calibration, direction: str, dtype: str, head_dim: int):
    for kernel in KERNEL_PREFERENCE:
        found = _curve(cal, "attention", lambda c, k=kernel: (c.kernel, c.direction, c.causal,
                                                               c.dtype, c.head_dim)
                       == (k, direction, True, dtype, head_dim))
        if found is not None:
            return found
    raise ConfigError("profile: attention", f"{direction} causal {dtype} head_dim {head_dim}",
                      "an [[attention]] entry for it (bench attention --head-dims ...)")


def raw_step(cal: Calibration, shape: Transformer, *, batch: int, seq_len: int,
             dtype: str = "bfloat16") -> StepPrediction:
    """The step's kernels alone (no fitted constants)."""
    pdtype = AUTOCAST_DTYPE.get(dtype, dtype)
    gemm = _curve(cal, "gemm", lambda c: c.dtype == pdtype)
    memory = _curve(cal, "memory", lambda c: True)
    if gemm is None or memory is None:
        raise ConfigError("profile", cal.path or "?", f"a [[gemm]] entry for {pdtype} and a [[memory]] entry")
    tokens = batch * seq_len
    width = 2 if pdtype in ("bf16", "fp16") else 4
    fwd = [gemm_time(gemm, m, n, k, element_bytes=width, bandwidth=memory.bandwidth)
           for m, n, k in _gemms(shape, tokens)]
    bwd = [gemm_time(gemm, m, k, n, element_bytes=width, bandwidth=memory.bandwidth)
           + gemm_time(gemm, n, k, m, element_bytes=width, bandwidth=memory.bandwidth)
           for m, n, k in _gemms(shape, tokens)]
    gemm_s = float(sum(fwd) + sum(bwd))
    attn_s = 0.0
    for direction in ("forward", "backward"):
        curve = _attention_curve(cal, direction, pdtype, shape.head_dim)
        flops = attention_flops(batch=batch, heads=shape.heads, seq_len=seq_len,
                                head_dim=shape.head_dim, causal=True, direction=direction)
        attn_s += shape.layers * attention_time(curve, gemm.peak_flop_rate, flops, seq_len)
    params = param_count(shape).total
    per_layer = (FORWARD_BYTES_PER_TOKEN_HIDDEN * tokens * shape.hidden
                 + ACTIVATION_BYTES[shape.gated_mlp] * tokens * shape.ffn_hidden)
    moved = (shape.layers * per_layer * (1 + BACKWARD_BYTES_FACTOR)
             + LOGIT_BYTES * tokens * shape.vocab
             + (WEIGHT_BYTES_PER_PARAM + OPTIMIZER_BYTES_PER_PARAM) * params)
    kernels = shape.layers * sum(KERNELS_PER_LAYER.values())
    memory_s = memory_time(memory, moved) + (kernels - 1) * memory.kernel_overhead
    state, activations = _peak_parts(cal, shape, batch=batch, seq_len=seq_len)
    peak = state + activations
    return StepPrediction(step=gemm_s + attn_s + memory_s, gemm=gemm_s, attention=attn_s,
                          memory_bound=memory_s, overhead=0.0, peak_allocated=peak,
                          peak_reserved=peak, peak_state=state)


def _peak_parts(cal: Calibration, shape: Transformer, *, batch: int, seq_len: int) -> tuple[float, float]:
    """``(state, activation part)`` bytes of the peak (module docstring), from the estimate's
    memory breakdown for the benchmark's setup on the profile's GPU."""
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario

    gpu = (cal.provenance.gpu if cal.provenance is not None else "") or "h100-sxm"
    settings = {"model": shape, "gpu": gpu, "nodes": 1, "gpus_per_node": 1, "dp": 1,
                "micro_batch": batch, "global_batch": batch, "seq_len": seq_len, "dtype": "bf16",
                "flash_attention": True, "optimizer": "adamw-foreach", "framework": "ddp",
                "gradient_as_bucket_view": True, "recompute": "none"}
    memory = estimate(build_scenario(settings), allow_oom=True).memory
    fixed = memory.state + memory.buffers + memory.workspace
    activations = (memory.activations or 0.0) + LOGIT_GRAD_BYTES * batch * seq_len * shape.vocab
    return fixed, max(activations, memory.step)


def predict_step(cal: Calibration, shape: Transformer, constants: StepConstants, *, batch: int,
                 seq_len: int, dtype: str = "bfloat16") -> StepPrediction:
    """:func:`raw_step` with the fitted constants applied."""
    raw = raw_step(cal, shape, batch=batch, seq_len=seq_len, dtype=dtype)
    allocated = raw.peak_state + (raw.peak_allocated - raw.peak_state) * constants.memory_scale
    return StepPrediction(step=raw.step + constants.step_overhead, gemm=raw.gemm,
                          attention=raw.attention, memory_bound=raw.memory_bound,
                          overhead=constants.step_overhead, peak_allocated=allocated,
                          peak_reserved=allocated * constants.reserved_ratio, peak_state=raw.peak_state)
