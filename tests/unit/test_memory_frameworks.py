"""Bytes per parameter by framework and ZeRO stage, against each framework's documents."""

import numpy as np
import pytest

from willitscale.errors import ConfigError
from willitscale.memory.frameworks import (
    FRAMEWORKS,
    check_framework_stage,
    convention_table,
    implied_framework,
    layout_text,
    state_bytes_table,
)


def per_param(table, framework, zero, d):
    fw = FRAMEWORKS.index(framework)
    return sum(float(p[fw, zero, 0]) + float(p[fw, zero, 1]) / d
               for p in (table.weights, table.gradients, table.master, table.optimizer))


@pytest.mark.parametrize("dtype,grad,zero0,rep,sharded", [
    # NVIDIA/Megatron-LM docs/user-guide/features/dist_optimizer.md @859b66a, its table:
    # "bf16 parameters, fp32 gradients | 18 | 6 + 12/d", "fp16 parameters, fp16 gradients | 20 |
    # 4 + 16/d", "fp32 parameters, fp32 gradients | 16 | 8 + 8/d"
    ("bf16", 4, 18, 6, 12), ("fp16", 2, 20, 4, 16), ("fp32", 4, 16, 8, 8)])
def test_megatron_matches_its_distributed_optimizer_table(dtype, grad, zero0, rep, sharded):
    table = state_bytes_table(dtype, grad)
    assert per_param(table, "megatron", 0, 8) == zero0
    for d in (1, 8, 64):
        assert per_param(table, "megatron", 1, d) == pytest.approx(rep + sharded / d)


def test_fsdp_mixed_precision_is_16_over_d():
    # PyTorch FSDP: fp32 sharded parameters are the optimizer's copy ("FSDP does not require any
    # extra memory to keep a high-precision copy"), fp32 gradient shard, Adam: 4 + 4 + 8 over d
    table = state_bytes_table("bf16", 2)
    for zero in (2, 3):
        assert per_param(table, "fsdp", zero, 16) == pytest.approx(16 / 16)


def test_deepspeed_stages_shard_as_zero_says():
    # fp16 weights and gradients, fp32 master and Adam (ZeRO paper's 2 + 2 + 12)
    table = state_bytes_table("fp16", 2)
    d = 8
    assert per_param(table, "deepspeed", 0, d) == 16
    assert per_param(table, "deepspeed", 1, d) == pytest.approx(4 + 12 / d)
    assert per_param(table, "deepspeed", 2, d) == pytest.approx(2 + 14 / d)
    assert per_param(table, "deepspeed", 3, d) == pytest.approx(16 / d)
    # bf16 with ZeRO off is the BF16 optimizer (DeepSpeed engine.py @56c5223 builds it only when
    # zero_optimization() is false): bf16 weights and gradients (2 + 2), "The additional memory
    # usage is 4bytes x params and it's not sharded across gpus" (BigScience chronicles-prequel.md),
    # and its fp32 master + Adam on the rank's partition (bf16_optimizer.py
    # fp32_groups_flat_partition): 8 + 12/d
    bf16 = state_bytes_table("bf16", 2)
    assert per_param(bf16, "deepspeed", 0, d) == pytest.approx(2 + 2 + 4 + 12 / d)
    # bf16 with ZeRO-1 is the ZeRO optimizer in bf16, the same layout as fp16: 4 + 12/d
    assert per_param(bf16, "deepspeed", 1, d) == pytest.approx(4 + 12 / d)
    # ZeRO stores gradients in the weights' dtype (stage_1_and_2.py dtype=self.dtype): an fp32
    # reduction (--grad-reduce-dtype fp32) changes the wire, not the 2 bytes kept
    assert per_param(state_bytes_table("bf16", 4), "deepspeed", 1, d) == pytest.approx(4 + 12 / d)
    assert per_param(state_bytes_table("bf16", 4), "deepspeed", 2, d) == pytest.approx(2 + 14 / d)
    # fp16 with ZeRO off (FP16_Optimizer) shards nothing: still 16
    assert per_param(state_bytes_table("fp16", 2), "deepspeed", 0, 1) == 16


def test_ddp_keeps_fp32_weights_gradients_and_adam():
    assert per_param(state_bytes_table("bf16", 4), "ddp", 0, 1) == 16


def test_the_plan_implies_a_framework():
    zero = np.array([0, 1, 2, 3, 0, 1])
    mp = np.array([False, False, False, False, True, True])
    names = [FRAMEWORKS[i] for i in implied_framework(zero, mp)]
    assert names == ["ddp", "deepspeed", "deepspeed", "fsdp", "megatron", "megatron"]


def test_a_framework_refuses_stages_it_does_not_have():
    with pytest.raises(ConfigError, match="megatron"):
        check_framework_stage("megatron", 2)
    with pytest.raises(ConfigError, match="FULL_SHARD"):
        check_framework_stage("fsdp", 1)
    check_framework_stage("deepspeed", 3)


def test_a_convention_is_sharded_where_the_framework_shards():
    table = convention_table(2, 2, 4, 8)  # zero-16
    assert per_param(table, "megatron", 1, 8) == pytest.approx(4 + 12 / 8)  # weights+grads whole
    assert per_param(table, "fsdp", 2, 8) == pytest.approx(16 / 8)  # FSDP shards all four
    assert layout_text("megatron", 1, state_bytes_table("bf16", 4)) == "6 + 12/d B/param"
