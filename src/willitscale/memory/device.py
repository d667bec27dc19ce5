"""What a GPU holds beyond PyTorch's tensors, and the three verdicts.

* **CUDA context** (kernels, driver state; outside ``torch.cuda.memory_allocated``, inside
  nvidia-smi): :data:`CUDA_CONTEXT_BYTES`, 0.51 GiB, from LitGPT's documented out-of-memory
  message on an 80 GB A100 ("this process has 78.93 GiB memory in use. Of the allocated
  memory 76.28 GiB is allocated by PyTorch, and 2.14 GiB is reserved by PyTorch but
  unallocated": 78.93 - 76.28 - 2.14 GiB not PyTorch's; Lightning-AI/litgpt tutorials/oom.md
  @6d04a87). Older stacks load every kernel eagerly: BigScience measured 1,573 MiB on an A100
  in 2022 (``--cuda-context`` sets it).
* **NCCL** buffers, per communicator the GPU uses (each group of more than one rank): 544 MiB
  for two ranks, 688 MiB for more, measured on 4 A100s over NVLink (NVIDIA/nccl issue #964:
  "for group with only 2 devices, it requires 544 MB. And for group with more than 2 devices,
  it requires 688 MB"); "beyond 2 nodes it should no longer increase" (NVIDIA/nccl #986).
  DeepSpeed's pipeline engine adds communicators of its own (:func:`deepspeed_pipeline_groups`).
* **The caching allocator.** At an out-of-memory error part of what PyTorch reserved cannot
  hold the request (fragmentation): :data:`ALLOCATOR_MARGIN` of what is allocated, the largest
  share among the out-of-memory messages of language-model training in
  ``validation/data/allocator.toml`` (the fit rows: none of them is a configuration the
  tests predict). Between steps the allocator also keeps freed blocks cached: what nvidia-smi
  shows is the context, NCCL and the *reserved* peak, :data:`RESERVED_RATIO` x the allocated
  peak (the median of the same file's training logs that print both: FSDP runs, whose
  all-gathered units are allocated on a side stream and held for it). DeepSpeed's engine at
  ZeRO stage 0-2 allocates on the compute stream; its reserve,
  :data:`DEEPSPEED_RESERVED_RATIO`, is fitted on its own rows
  (``validation/data/deepspeed_reserve.toml``: BigScience's 2021 Megatron-DeepSpeed experiment
  logs, rule committed before the rows). :func:`reserved_ratio` picks one per plan.

Verdicts, with ``need = allocated peak + context + NCCL`` against the GPU's memory (times
``--memory-fraction``, 1 by default):

* **fits**: what the caching allocator typically reserves, :func:`reserved_ratio` x the
  allocated peak, plus context and NCCL, is within it (what nvidia-smi would show);
* **tight**: ``need`` is within it, the typical reserve is not: it runs if the allocator can
  give back its cache (cudaMalloc retries, or ``expandable_segments:True``), and may fail on
  fragmentation (up to :data:`ALLOCATOR_MARGIN` of what was allocated was unusable at the fit
  rows' out-of-memory errors);
* **does not fit**: ``need`` exceeds it (by how much, and which change would make it fit).
"""

from __future__ import annotations

import numpy as np

from willitscale.memory.frameworks import DEEPSPEED, MEGATRON

__all__ = ["CUDA_CONTEXT_BYTES", "NCCL_PAIR_BYTES", "NCCL_GROUP_BYTES", "ALLOCATOR_MARGIN",
           "RESERVED_RATIO", "DEEPSPEED_RESERVED_RATIO", "VERDICTS", "nccl_bytes",
           "reserved_ratio", "verdict_codes", "deepspeed_pipeline_groups", "megatron_groups"]

MIB = 2 ** 20
GIB = 2 ** 30
#: 78.93 - 76.28 - 2.14 GiB (LitGPT tutorials/oom.md @6d04a87)
CUDA_CONTEXT_BYTES = 0.51 * GIB
NCCL_PAIR_BYTES = 544 * MIB  #: a two-rank communicator (NVIDIA/nccl #964)
NCCL_GROUP_BYTES = 688 * MIB  #: a communicator of more than two ranks (NVIDIA/nccl #964)
#: the largest (reserved - allocated) / allocated of the fit rows' out-of-memory messages
#: (ragntune/code-llama-finetune #3: 351.89 MiB reserved but unallocated over 8.79 GiB
#: allocated); tests/unit/test_memory_allocator_fit.py recomputes it from the data
ALLOCATOR_MARGIN = 0.0391
#: the median max-reserved / max-allocated of the fit rows' training logs (llama-recipes prints:
#: 63/42, 58/42, 29/19 GB); tests/unit/test_memory_allocator_fit.py recomputes it
RESERVED_RATIO = 1.5
#: the median over runs of max-reserved / max-allocated of DeepSpeed-engine runs at ZeRO 0-2
#: (validation/data/deepspeed_reserve.toml: 1.1679, 1.1539);
#: tests/unit/test_memory_allocator_fit.py recomputes it
DEEPSPEED_RESERVED_RATIO = 1.1609

#: verdict codes: 0 fits, 1 tight, 2 does not fit
VERDICTS = ("fits", "tight", "does not fit")


def nccl_bytes(group_sizes) -> np.ndarray:
    """NCCL's buffers on one GPU for the groups it communicates in (arrays of group sizes,
    stacked on the last axis; sizes of 1 cost nothing)."""
    sizes = np.asarray(group_sizes, dtype=float)
    per = np.where(sizes > 2, NCCL_GROUP_BYTES, np.where(sizes == 2, NCCL_PAIR_BYTES, 0.0))
    return per.sum(axis=-1)


def deepspeed_pipeline_groups(framework, tp, pp, tied) -> np.ndarray:
    """Sizes of the communicators DeepSpeed's pipeline engine adds on one GPU to those a
    Megatron-style plan uses (tp, dp, pp, tied embeddings), stacked on the last axis (1: none).

    From DeepSpeed @3293cf7 (v0.5.10, January 2022), Megatron-DeepSpeed's engine:
    ``PipelineParallelGrid`` (``runtime/pipe/topology.py``) builds its own process groups beside
    Megatron's (``dist.new_group``: a new NCCL communicator each, created on its first
    collective), and the engine runs collectives on three of them every step:

    * the model-parallel group, tp x pp ranks: ``CheckOverflow`` and ``get_grad_norm``
      (``runtime/utils.py``) all-reduce over ``mpu.get_model_parallel_group()``, and the
      pipeline engine's ``mpu`` is the grid (``deepspeed/__init__.py``: ``mpu=model.mpu()``);
      ``PipelineEngine.__init__`` all-reduces the parameter count over it too;
    * the slice group, tp ranks, when tp > 1: activations and their gradients cross stages
      partitioned over tp and are all-gathered over ``get_slice_parallel_group()``
      (``pipe/engine.py``: ``is_pipe_partitioned = is_model_parallel``);
    * point-to-point: with torch >= 1.8 ``p2p.send``/``recv`` call ``dist.send``/``dist.recv``
      (``pipe/p2p.py``, ``can_send_recv``), for which PyTorch's NCCL process group opens a
      two-rank communicator per peer pair (``ProcessGroupNCCL.cpp`` ``getKeySendRecv``,
      pytorch/pytorch @cf1380d): one pair on the first and last stage, two on the others.

    The grid's pipe and data-parallel groups (loss broadcast, gradient all-reduce) stand in
    for the pp and dp groups already counted. Per plan the worst stage is taken, as the tied
    group is (``tied``: 2 where that two-rank group is counted, else 0): with pp > 2 an inner
    stage's two pairs, or the first stage's one pair beside the tied group.
    """
    ds = (np.asarray(framework) == DEEPSPEED) & (np.asarray(pp) > 1)
    tp, pp = np.asarray(tp, dtype=float), np.asarray(pp, dtype=float)
    model = np.where(ds, tp * pp, 1.0)
    slice_ = np.where(ds & (tp > 1), tp, 1.0)
    pair_next = np.where(ds, 2.0, 1.0)
    pair_prev = np.where(ds & (pp > 2) & (np.asarray(tied) != 2), 2.0, 1.0)
    return np.stack(np.broadcast_arrays(model, slice_, pair_next, pair_prev), axis=-1)


def megatron_groups(framework, zero, tp, pp, world) -> np.ndarray:
    """Sizes of the communicators Megatron's own code adds on the fullest GPU to those the plan's
    parallel groups use (tp, cp, ep, dp, pp, tied embeddings), stacked on the last axis (1:
    none). PyTorch creates an NCCL communicator on a group's first collective
    (:func:`deepspeed_pipeline_groups`), so a group Megatron creates costs buffers only where a
    collective runs on it; these run in every training job:

    * **the world group** (all ``world`` GPUs), a communicator of its own beside every
      ``new_group``: Megatron-LM's ``pretrain`` all-reduces its start time over it
      (``megatron/training/training.py`` @d98e8a6, ``torch.distributed.all_reduce(
      start_time_tensor, op=torch.distributed.ReduceOp.MIN)``); BigScience's Megatron-DeepSpeed
      does the same and calls ``torch.distributed.barrier()`` (``megatron/training.py`` and
      ``megatron/initialize.py`` @00f5f88);
    * **megatron**: the group the gradient norm is all-reduced over every step (``clip_grad``
      is 1.0 by default): ``MODEL_PARALLEL_GROUP`` (tp x pp ranks) for the Float16 optimizer
      (ZeRO 0), ``INTRA_DISTRIBUTED_OPTIMIZER_INSTANCE_GROUP`` for the distributed optimizer
      (ZeRO 1), which holds every rank with one optimizer instance
      (``megatron/core/optimizer/__init__.py`` and ``megatron/core/parallel_state.py``
      @d98e8a6, ``grad_stats_parallel_group``); each is its own ``create_group``;
    * **deepspeed with pipelining** (Megatron-DeepSpeed, whose engine's groups are
      :func:`deepspeed_pipeline_groups`): Megatron's ``mpu`` makes its own data-parallel and
      pipeline groups beside DeepSpeed's grid (``megatron/mpu/initialize.py`` @00f5f88), and
      the GPUs of tensor rank 0, which alone build the datasets (``megatron/training.py``:
      "Data loader only on rank 0 of each model parallel group"), all-reduce a count over both
      (``megatron/data/gpt_dataset.py`` ``_build_index_mappings``). The fullest GPU is taken,
      as for the tied group: one of tensor rank 0.

    Each is costed at NVIDIA/nccl #964's 544/688 MiB, measured on 4 GPUs of one node; what a
    communicator of hundreds of ranks over several nodes holds is not measured here (#986:
    "beyond 2 nodes it should no longer increase").
    """
    fw = np.asarray(framework)
    z, tp, pp = np.asarray(zero), np.asarray(tp, dtype=float), np.asarray(pp, dtype=float)
    world = np.asarray(world, dtype=float)
    megatron = fw == MEGATRON
    ds_pipe = (fw == DEEPSPEED) & (pp > 1)
    world_group = np.where(megatron | ds_pipe, world, 1.0)
    second = np.where(megatron, np.where(z >= 1, world, tp * pp),
                      np.where(ds_pipe, world / (tp * pp), 1.0))
    third = np.where(ds_pipe, pp, 1.0)
    return np.stack(np.broadcast_arrays(world_group, second, third), axis=-1)


def reserved_ratio(framework, zero) -> np.ndarray:
    """The allocator's reserve over the allocated peak per plan (arrays of framework codes and
    ZeRO stages): :data:`DEEPSPEED_RESERVED_RATIO` for DeepSpeed at ZeRO 0-2, else
    :data:`RESERVED_RATIO`."""
    deepspeed = (np.asarray(framework) == DEEPSPEED) & (np.asarray(zero) <= 2)
    return np.where(deepspeed, DEEPSPEED_RESERVED_RATIO, RESERVED_RATIO)


def verdict_codes(allocated, other, limit, ratio=RESERVED_RATIO) -> np.ndarray:
    """0 fits, 1 tight, 2 does not fit, for ``allocated`` (PyTorch's peak) plus ``other``
    (context, NCCL) against ``limit`` bytes (see the module docstring)."""
    a = np.asarray(allocated, dtype=float)
    other = np.asarray(other, dtype=float)
    return np.where(a + other > limit, 2, np.where(ratio * a + other > limit, 1, 0)).astype(np.int64)
