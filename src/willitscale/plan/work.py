"""The work of one step on one GPU: parameters, FLOPs, and when gradients become ready.

From a transformer shape the FLOPs are exact (every matmul, :mod:`willitscale.workload.flops`);
from a bare parameter count (``--params``) they are the standard approximations: ``2P`` forward
FLOPs per token, ``6P`` for forward + backward (Kaplan et al. 2020), one more ``2P`` with full
recomputation (``8P``: the handbook's ``4 x 2 x P``). Selective recomputation reruns only the
attention core, whose FLOPs need the shape: in ``--params`` mode it adds nothing, and the
estimate says so.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.plan.gradients import GradientLayout, gradient_layout
from willitscale.plan.scenario import Scenario

__all__ = ["StepWork", "step_work", "work_notes"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepWork:
    """FLOPs of one micro-step on one GPU, by phase, and the gradient layout."""

    params: float
    forward_flops: float  #: one micro-step
    backward_flops: float  #: one micro-step, 2 x forward (model FLOPs)
    recompute_flops: float  #: one micro-step, executed in backward
    micro_steps: int
    layout: GradientLayout | None  #: None without a shape: gradients ready uniformly

    @property
    def model_flops(self) -> float:
        """Per optimizer step: forward + backward, no recomputation (MFU's numerator)."""
        return (self.forward_flops + self.backward_flops) * self.micro_steps

    @property
    def executed_flops(self) -> float:
        """Per optimizer step, recomputation included (HFU's numerator)."""
        return self.model_flops + self.recompute_flops * self.micro_steps


def work_notes(scenario: Scenario) -> tuple[str, ...]:
    """How the FLOPs were counted, for the assumptions of a report."""
    plan = scenario.plan
    if scenario.model is None:
        notes = ("FLOPs from the parameter count: 2P forward, 4P backward per token "
                 "(6PD, Kaplan et al. 2020)"
                 + ("; full recomputation adds 2P (8PD)" if plan.recompute == "full" else ""),)
        if plan.recompute == "selective":
            notes += ("selective recomputation reruns the attention core, whose FLOPs need the "
                      "model shape: counted as 0 in --params mode",)
        return notes
    executed = ("with FlashAttention the causal kernel skips the masked blocks, so the time counts "
                "half the attention scores" if scenario.options.flash_attention else
                "standard attention computes every score, masked or not")
    return (f"FLOPs counted matmul by matmul for {scenario.model.name} at {scenario.seq_len} tokens: "
            "MFU counts the attention scores in full, as Megatron-LM and PaLM do; " + executed,)


def step_work(scenario: Scenario) -> StepWork:
    """The FLOPs and gradient layout of ``scenario``'s step on one GPU (how they were counted:
    :func:`work_notes`)."""
    plan = scenario.plan
    tokens = plan.micro_batch * scenario.seq_len  # per GPU per micro-step
    if scenario.model is None:
        p = float(scenario.params)
        recompute = {"none": 0.0, "selective": 0.0, "full": 2.0 * p}[plan.recompute]
        return StepWork(params=p, forward_flops=2.0 * p * tokens, backward_flops=4.0 * p * tokens,
                        recompute_flops=recompute * tokens, micro_steps=plan.grad_accum,
                        layout=None)
    from willitscale.workload.flops import training_flops
    from willitscale.workload.params import param_count

    model = scenario.model
    flops = training_flops(model, scenario.seq_len, recompute=plan.recompute)
    forward = float(flops.forward_per_token) * tokens
    executed = float(flops.hardware_per_token) * tokens
    return StepWork(
        params=float(param_count(model).total),
        forward_flops=forward,
        backward_flops=2.0 * forward,
        recompute_flops=executed - 3.0 * forward,
        micro_steps=plan.grad_accum,
        layout=gradient_layout(model, flops),
    )


def gradient_ready(work: StepWork, grad_bytes: int, *, first_cap: float, cap: float):
    """``(bucket_bytes, ready_fraction)``: DDP buckets and when each is ready in backward."""
    from willitscale.plan.buckets import assign_buckets, bucket_totals, uniform_buckets

    if work.layout is None:
        return uniform_buckets(work.params * grad_bytes, first_cap=first_cap, cap=cap)
    sizes = work.layout.params * grad_bytes
    index = assign_buckets(sizes, first_cap=first_cap, cap=cap)
    bucket_bytes, ready = bucket_totals(sizes, work.layout.ready_fraction, index)
    return bucket_bytes, np.clip(ready, 0.0, 1.0)
