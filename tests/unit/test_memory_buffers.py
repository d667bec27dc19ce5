"""Buffers, workspace and step temporaries per framework; NCCL; the three verdicts."""

import numpy as np

from willitscale.memory.buffers import (
    CUBLAS_WORKSPACE_BYTES,
    DeepSpeedOptions,
    framework_buffers,
)
from willitscale.memory.device import (
    NCCL_GROUP_BYTES,
    NCCL_PAIR_BYTES,
    RESERVED_RATIO,
    nccl_bytes,
    verdict_codes,
)
from willitscale.memory.frameworks import FRAMEWORKS

P = 1e9
LAYER = 1e8


def buffers(framework, zero, *, dtype="bf16", grad=2, bucket_view=False, foreach=False,
            deepspeed=DeepSpeedOptions(), after_backward=False):
    fw = np.array([[FRAMEWORKS.index(framework)]])
    return framework_buffers(
        framework=fw, zero=np.array([[zero]]), dtype=dtype, grad_bytes=grad,
        stage_params=np.array([[P]]), layer_params=np.array([[LAYER]]),
        linear_params=np.array([[0.9 * P]]), shard=np.array([[8.0]]),
        pipeline_message=np.zeros((1, 1)), gradient_as_bucket_view=bucket_view,
        deepspeed=deepspeed, foreach_adamw=foreach,
        reduce_after_backward=np.array([[after_backward]]))


def test_ddp_bucket_copy_and_autocast_copies():
    b = buffers("ddp", 0)
    assert b.communication[0, 0] == 4 * P  # a copy of every fp32 gradient
    assert b.workspace[0, 0] == CUBLAS_WORKSPACE_BYTES + 2 * 0.9 * P  # bf16 casts of the matmul weights
    assert buffers("ddp", 0, bucket_view=True).communication[0, 0] == 0
    assert buffers("ddp", 0, dtype="fp32").workspace[0, 0] == CUBLAS_WORKSPACE_BYTES  # no autocast
    assert buffers("ddp", 0, foreach=True).step[0, 0] == 4 * P  # foreach AdamW's sqrt temporaries


def test_deepspeed_buckets_are_real_allocations():
    # reduce_bucket_size 5e8 elements of fp16: 1 GB, doubled with overlap_comm (stage_1_and_2.py)
    fp16 = buffers("deepspeed", 2, dtype="fp16")
    assert fp16.communication[0, 0] == 5e8 * 2
    overlap = buffers("deepspeed", 1, dtype="fp16", deepspeed=DeepSpeedOptions(overlap_comm=True))
    assert overlap.communication[0, 0] == 2 * 5e8 * 2
    # bf16 with ZeRO-1 runs the ZeRO optimizer in bf16: the same 1 GB bucket
    assert buffers("deepspeed", 1, dtype="bf16").communication[0, 0] == 5e8 * 2
    # the BF16 optimizer (bf16, ZeRO off) has no ipg buckets and hands Adam a view of its fp32
    # accumulator: no step temporaries
    assert buffers("deepspeed", 0, dtype="bf16").communication[0, 0] == 0
    assert buffers("deepspeed", 0, dtype="bf16").step[0, 0] == 0
    # the fp32 gradient partition handed to the optimizer: 4 / d per parameter
    assert fp16.step[0, 0] == 4 * P / 8
    # fp16 with ZeRO off (FP16_Optimizer.step, fused_optimizer.py @3293cf7): the list of fp32
    # copies of every gradient (4 P) and their flat concatenation (4 P) are alive together
    assert buffers("deepspeed", 0, dtype="fp16").step[0, 0] == 8 * P
    # ZeRO-3: one reduce bucket (overlap_comm defaults to True there: 2) + layer + prefetch bucket
    z3 = buffers("deepspeed", 3, dtype="fp16")
    assert z3.communication[0, 0] == 5e8 * 2 + (LAYER + 5e8) * 2


def test_pipeline_stages_reduce_after_their_last_backward():
    # DeepSpeed's pipeline engine runs a stage's backward outside ZeRO (all but the last stage)
    # and allocates the reduce bucket in reduce_gradients(pipeline_parallel=True), after the
    # last backward, releasing it before the step (stage_1_and_2.py, pipe/engine.py @3293cf7):
    # fp16 ZeRO-1 on 8 ranks, 1e9 parameters: no bucket beside the activations; after the
    # backward max(bucket 5e8 x 2 B = 1e9, the step's fp32 partition 4 x 1e9 / 8 = 5e8) = 1e9
    piped = buffers("deepspeed", 1, dtype="fp16", after_backward=True)
    assert piped.communication[0, 0] == 0
    assert piped.step[0, 0] == max(5e8 * 2, 4 * P / 8)
    # the last stage (and pp 1) backward through ZeRO: the bucket is alive with the activations
    last = buffers("deepspeed", 1, dtype="fp16")
    assert last.communication[0, 0] == 5e8 * 2 and last.step[0, 0] == 4 * P / 8
    # ZeRO-0's FP16_Optimizer has no bucket: nothing moves
    assert buffers("deepspeed", 0, dtype="fp16", after_backward=True).step[0, 0] == 8 * P


def test_fsdp_units_in_flight():
    # FULL_SHARD: max(3 h, h + 2 g) per parameter of one layer (PyTorch's FSDP2 memory test)
    assert buffers("fsdp", 3).communication[0, 0] == max(3 * 2, 2 + 2 * 2) * LAYER
    # no reshard after forward: every layer unsharded, plus 1.5 layers
    assert buffers("fsdp", 2).communication[0, 0] == 2 * P + 1.5 * 2 * LAYER


def test_nccl_one_communicator_per_group():
    # groups of 8 (tp), 2 (pp pair) and 1 (nothing): 688 + 544 MiB (NVIDIA/nccl #964)
    assert nccl_bytes(np.array([[8, 2, 1]]))[0] == NCCL_GROUP_BYTES + NCCL_PAIR_BYTES
    assert NCCL_GROUP_BYTES == 688 * 2**20 and NCCL_PAIR_BYTES == 544 * 2**20


def test_three_verdicts():
    limit, other = 80.0, 2.0
    # allocated 50: 50 + 2 fits, 1.5 x 50 + 2 = 77 fits too
    # allocated 60: 62 fits, 92 does not -> tight; allocated 79: 81 > 80 -> does not fit
    codes = verdict_codes(np.array([50.0, 60.0, 79.0]), other, limit)
    assert RESERVED_RATIO == 1.5 and list(codes) == [0, 1, 2]
