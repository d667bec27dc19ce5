"""Memory per GPU of a data-parallel step: training state plus activations, against HBM.

Training state: parameters x bytes per parameter of a named convention
(:mod:`willitscale.workload.memory`). The default follows the gradient dtype on the wire: with
fp32 gradients (PyTorch AMP, the default) ``handbook-18`` (the 18 bytes per parameter of
seeds/000); with bf16/fp16 gradients ``zero-16`` (ZeRO's 16). Activations: the workload
module's per-micro-batch count for the recomputation used; without a model shape they cannot be
computed, and the estimate says so instead of inventing a number.
"""

from __future__ import annotations

from willitscale.plan.result import MemoryBreakdown
from willitscale.plan.scenario import Scenario
from willitscale.plan.work import StepWork

__all__ = ["memory_breakdown", "default_convention"]


def default_convention(grad_reduce_dtype: str) -> str:
    """The training-state convention matching the gradient dtype."""
    return "handbook-18" if grad_reduce_dtype == "fp32" else "zero-16"


def memory_breakdown(scenario: Scenario, work: StepWork) -> tuple[MemoryBreakdown, tuple[str, ...]]:
    """Bytes per GPU by part, and what could not be computed (with the reason)."""
    from willitscale.workload.memory import state_memory

    convention = scenario.memory_convention or default_convention(scenario.ddp.grad_reduce_dtype)
    state = state_memory(work.params, convention, zero_stage=scenario.plan.zero, dp=scenario.plan.dp)
    unknowns: tuple[str, ...] = ()
    if scenario.model is None:
        activations = None
        unknowns = ("activation memory: needs the model shape (layers, hidden size); "
                    "memory_per_gpu_bytes counts the training state only (a lower bound)",)
    else:
        from willitscale.workload.activations import activation_memory

        activations = float(activation_memory(
            scenario.model, scenario.seq_len, scenario.plan.micro_batch,
            recompute=scenario.plan.recompute, dtype_bytes=2).total)
    memory = MemoryBreakdown(
        weights=float(state.weights), gradients=float(state.gradients),
        optimizer=float(state.master) + float(state.optimizer), activations=activations,
        capacity=scenario.cluster.gpu.memory, convention=str(state.convention))
    return memory, unknowns
