"""DeepSpeed's pipeline engine's own communicators (memory.device.deepspeed_pipeline_groups) and
Megatron's (memory.device.megatron_groups).

Derivation (DeepSpeed @3293cf7, docs/memory.md 6.1): beside Megatron's tp, dp, pp and tied
groups, a pipeline-engine GPU runs collectives on the grid's model-parallel group (tp x pp
ranks: overflow check and gradient norm), its slice group (tp ranks, when tp > 1: partitioned
activations all-gathered) and one two-rank point-to-point communicator per neighbouring stage.
NCCL holds 688 MiB per group of more than two ranks and 544 MiB per pair (NVIDIA/nccl #964).
"""

import numpy as np
import pytest

from willitscale.estimation.estimate import estimate
from willitscale.memory.device import deepspeed_pipeline_groups, megatron_groups, nccl_bytes
from willitscale.memory.frameworks import DEEPSPEED, MEGATRON
from willitscale.scenario.build import build_scenario
from willitscale.validation.memory_runs import judge, memory_runs

MIB = 2 ** 20


@pytest.mark.parametrize(("tp", "pp", "tied", "sizes", "mib"), [
    # BLOOM's final run, tp 4 pp 12, tied embeddings counted on the first stage: model group
    # of 48, slice group of 4, the pair to stage 1 (the tied pair is counted elsewhere)
    (4, 12, 2, [48, 4, 2, 1], 688 + 688 + 544),
    # tp 1: no slice group; pp 48
    (1, 48, 2, [48, 1, 2, 1], 688 + 544),
    # untied, pp 6: an inner stage talks to two neighbours
    (2, 6, 0, [12, 2, 2, 2], 688 + 544 + 544 + 544),
    # pp 2: one neighbour, model group tp x 2 = 2 ranks is a pair
    (1, 2, 0, [2, 1, 2, 1], 544 + 544),
])
def test_the_pipeline_engine_adds_its_grid_groups(tp, pp, tied, sizes, mib):
    got = deepspeed_pipeline_groups(np.array([DEEPSPEED]), np.array([tp]), np.array([pp]),
                                    np.array([tied]))
    assert got.tolist() == [sizes]
    assert nccl_bytes(got)[0] == mib * MIB


@pytest.mark.parametrize(("framework", "pp"), [(MEGATRON, 8), (DEEPSPEED, 1)])
def test_no_groups_are_added_without_the_pipeline_engine(framework, pp):
    got = deepspeed_pipeline_groups(np.array([framework]), np.array([8]), np.array([pp]),
                                    np.array([0]))
    assert nccl_bytes(got)[0] == 0


def test_the_estimate_counts_them_for_bloom_176b():
    # tr11-176B: tp 4, pp 12, dp 8, tied embeddings. Megatron-style groups: tp 4, dp 8, pp 12
    # (688 MiB each) and the tied pair (544 MiB) = 2608 MiB; the engine's own: 1920 MiB;
    # Megatron-DeepSpeed's own on tensor rank 0: the world (384), its mpu's dp (8) and pp (12)
    # groups, 3 x 688 = 2064 MiB
    run = next(r for r in memory_runs() if r.id == "bloom-176b-final")
    m = estimate(build_scenario({**run.settings, **run.documented}), allow_oom=True).memory
    assert m.nccl == (3 * 688 + 544 + 1920 + 3 * 688) * MIB
    assert judge(run).framework == "deepspeed"


@pytest.mark.parametrize(("framework", "zero", "tp", "pp", "world", "sizes", "mib"), [
    # Megatron-LM, Float16 optimizer (ZeRO 0): the world group and the model-parallel group the
    # gradient norm is all-reduced over (tp x pp = 64 ranks)
    (MEGATRON, 0, 8, 8, 1024, [1024, 64, 1], 688 + 688),
    # the distributed optimizer (ZeRO 1): its grad-stats group holds every rank (one instance)
    (MEGATRON, 1, 8, 8, 1024, [1024, 1024, 1], 688 + 688),
    # ZeRO 0 without model parallelism: a model-parallel group of one rank needs no
    # communicator; the world group (8 GPUs) is its own
    (MEGATRON, 0, 1, 1, 8, [8, 1, 1], 688),
    # Megatron-DeepSpeed, tp 4, pp 12, dp 8: the world (384) and, on tensor rank 0, its mpu's
    # data-parallel (384 / 48 = 8) and pipeline (12) groups
    (DEEPSPEED, 0, 4, 12, 384, [384, 8, 12], 3 * 688),
    # dp 1: no data-parallel communicator; pp 2 is a pair
    (DEEPSPEED, 1, 4, 2, 8, [8, 1, 2], 688 + 544),
    # DeepSpeed without pipelining (the tool cannot tell Megatron-DeepSpeed from plain
    # DeepSpeed there): nothing added
    (DEEPSPEED, 1, 8, 1, 8, [1, 1, 1], 0),
])
def test_megatron_adds_its_own_groups(framework, zero, tp, pp, world, sizes, mib):
    got = megatron_groups(np.array([framework]), np.array([zero]), np.array([tp]),
                          np.array([pp]), np.array([world]))
    assert got.tolist() == [sizes]
    assert nccl_bytes(got)[0] == mib * MIB


@pytest.mark.parametrize("zero", [0, 1])
def test_the_estimate_counts_megatrons_groups_for_gpt3(zero):
    # the GPT-3 175B plan (framework megatron: tp 8, pp 8, dp 16 on 1,024 GPUs, tied
    # embeddings): tp, pp and dp groups (688 MiB each) and the tied pair (544 MiB); Megatron's
    # own: the world group and the gradient-norm group (tp x pp = 64 ranks with ZeRO 0, every
    # rank with the distributed optimizer), 688 MiB each: 3 x 688 + 544 + 2 x 688 = 3,984 MiB
    sc = build_scenario({"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 128,
                         "gpus_per_node": 8, "tp": 8, "pp": 8, "dp": 16, "global_batch": 1536,
                         "seq_len": 2048, "zero": zero, "recompute": "full",
                         "sequence_parallel": False})
    assert estimate(sc, allow_oom=True).memory.nccl == (3 * 688 + 544 + 2 * 688) * MIB
