"""Everything ``willitscale model`` reports about one model, as one frozen result.

:func:`summarize_model` gathers parameters, training FLOPs, training-state memory and
activation memory for one configuration; :meth:`ModelSummary.to_json` gives the CLI's JSON
object (keys carry their unit: ``params_*`` counts, ``flops_*`` FLOPs, ``*_bytes*`` bytes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from willitscale.config import FrozenMap
from willitscale.errors import ConfigError
from willitscale.memory.activations import ActivationMemory, activation_memory
from willitscale.memory.state import StateMemory, state_memory
from willitscale.workload.approximations import approximate_flops_per_token
from willitscale.workload.flops import TrainingFlops, training_flops
from willitscale.workload.params import (
    ParamCount,
    embedding_params_per_tp_rank,
    head_params_per_tp_rank,
    layer_params_per_tp_rank,
    param_count,
    tp_divides_shape,
)
from willitscale.workload.recompute import BASE_MODES
from willitscale.workload.transformer import Transformer

__all__ = ["ModelSummary", "summarize_model"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSummary:
    """Parameters, FLOPs and memory of one model for one training configuration."""

    model: Transformer
    micro_batch: int
    tp: int
    params: ParamCount
    params_per_gpu: float  #: one tensor-parallel rank's share (no pipeline parallelism)
    flops: TrainingFlops  #: with the chosen recomputation
    hardware_flops_per_token: Mapping[str, float]  #: recompute mode -> executed FLOPs per token
    approximations: Mapping[str, float]  #: shortcut formula -> training FLOPs per token
    state_total: StateMemory  #: the whole model's training state, unsharded
    state_per_gpu: StateMemory  #: one GPU's share after TP and ZeRO
    activations: ActivationMemory

    def __repr__(self) -> str:
        return (f"ModelSummary({self.model.name}: {self.params.total:,} parameters "
                f"({self.params_per_gpu:,.0f} per GPU at tp {self.tp}), "
                f"{self.flops.model_per_token * self.flops.seq_len:.4g} model FLOPs per sequence of "
                f"{self.flops.seq_len}, micro-batch {self.micro_batch})")

    def to_json(self) -> dict[str, object]:
        """The JSON object ``willitscale model --json`` prints."""
        m, f, a = self.model, self.flops, self.activations
        s = f.seq_len
        out: dict[str, object] = {"model": m.name, "source": m.source, "shape": m.shape_dict()}
        out |= self.params.to_json()
        out |= {
            "params_per_gpu": self.params_per_gpu,
            "seq_len": s,
            "micro_batch": self.micro_batch,
            "recompute": f.recompute,
            "attention_counted": "causal half" if f.causal else "full s x s",
            "flash_attention": f.flash_attention,
            "flops_per_token_forward": f.forward_per_token,
            "flops_per_token_training": f.model_per_token,
            "flops_per_token_training_hardware": f.hardware_per_token,
            **{f"flops_per_token_training_recompute_{k}": v for k, v in self.hardware_flops_per_token.items()},
            "flops_per_token_layer_forward": f.layer_forward_per_token,
            "flops_per_token_layer_training": f.layer_model_per_token,
            "flops_per_token_layer_training_hardware": f.layer_hardware_per_token,
            "flops_per_token_lm_head_training": f.lm_head_per_token,
            "flops_per_sequence_training": f.model_per_sequence,
            "flops_per_sequence_training_hardware": f.hardware_per_sequence,
            "flops_per_microbatch_training_hardware": f.hardware_per_sequence * self.micro_batch,
            "flops_per_token_training_approximations": dict(self.approximations),
        }
        for prefix, st in (("state_bytes", self.state_total), ("state_bytes_per_gpu", self.state_per_gpu)):
            out |= {f"{prefix}_{k}": getattr(st, k) for k in ("weights", "gradients", "master", "optimizer")}
            out[f"{prefix}_total" if prefix == "state_bytes" else prefix] = st.total
        out |= {
            "state_convention": self.state_total.convention,
            "state_bytes_per_param": self.state_total.bytes_per_param,
            "zero_stage": self.state_per_gpu.zero_stage,
            "dp": self.state_per_gpu.dp,
            "tp": self.tp,
            "sequence_parallel": a.sequence_parallel,
            "dropout": a.dropout,
            "activation_bytes_per_layer": a.per_layer,
            "activation_bytes_per_layer_no_recompute": a.layer_no_recompute,
            "activation_bytes_layer_norms": a.layer_norms,
            "activation_bytes_layer_attention": a.layer_attention,
            "activation_bytes_layer_attention_scores": a.layer_attention_scores,
            "activation_bytes_layer_mlp": a.layer_mlp,
            "activation_bytes_recompute_transient": a.recompute_transient,
            "activation_bytes_embedding": a.embedding,
            "activation_bytes_head": a.head,
            "activation_bytes_per_microbatch": a.total,
        }
        return out


def summarize_model(model: Transformer, *, seq_len: int | None = None, micro_batch: int = 1,
                    recompute: str = "none", convention: str = "zero-16", zero_stage: int = 0,
                    dp: int = 1, tp: int = 1, sequence_parallel: bool = False,
                    flash_attention: bool = True, dropout: bool = False,
                    causal: bool = False) -> ModelSummary:
    """Parameters, FLOPs, training state and activations of ``model`` in one configuration."""
    seq_len = model.seq_len if seq_len is None else seq_len
    for name, value in (("seq_len", seq_len), ("micro_batch", micro_batch), ("tp", tp), ("dp", dp)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(name, value, "an integer >= 1")
    if model.position == "learned" and seq_len > model.max_positions:
        raise ConfigError("seq_len", seq_len,
                          f"<= {model.max_positions}, the size of {model.name}'s learned position table")
    if not tp_divides_shape(model, tp):
        raise ConfigError("tp", tp, f"a degree that splits {model.name} evenly: a divisor of heads = "
                                    f"{model.heads} and ffn_hidden = {model.ffn_hidden}"
                                    + (f" (dense_ffn {model.dense_ffn}, moe_shared_ffn "
                                       f"{model.moe_shared_ffn})" if model.is_moe else "")
                                    + ", and a divisor "
                                    f"or multiple of kv_heads = {model.kv_heads}")
    params = param_count(model)
    per_gpu = (embedding_params_per_tp_rank(model, tp) + model.layers * layer_params_per_tp_rank(model, tp)
               + head_params_per_tp_rank(model, tp))
    flops = training_flops(model, seq_len, recompute=recompute, causal=causal, flash_attention=flash_attention)
    by_mode = {mode: training_flops(model, seq_len, recompute=mode, causal=causal,
                                    flash_attention=flash_attention).hardware_per_token for mode in BASE_MODES}
    return ModelSummary(
        model=model, micro_batch=micro_batch, tp=tp, params=params, params_per_gpu=per_gpu,
        flops=flops, hardware_flops_per_token=FrozenMap(by_mode),
        approximations=FrozenMap(approximate_flops_per_token(model, seq_len)),
        state_total=state_memory(params.total, convention),
        state_per_gpu=state_memory(per_gpu, convention, zero_stage, dp),
        activations=activation_memory(model, seq_len, micro_batch, recompute=recompute, tp=tp,
                                      sequence_parallel=sequence_parallel,
                                      flash_attention=flash_attention, dropout=dropout),
    )
