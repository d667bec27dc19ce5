"""A job file names the framework that runs the job, and memory is counted as that framework's:
Megatron-LM command lines and YAML configs and NeMo 1.x configs (Megatron-Core) as Megatron's
layout, torchtitan job files as FSDP2 (sharded) or DDP; ``--framework`` overrides the file.
Without this, a pure data-parallel Megatron-LM job was counted as DeepSpeed ZeRO-1 (what the
plan alone implies, memory.frameworks)."""

from __future__ import annotations

import json

import pytest

from willitscale.cli.main import main
from willitscale.estimation.estimate import estimate
from willitscale.scenario.build import build_scenario
from willitscale.scenario.settings import load_settings

#: Llama 3 8B's shape (meta-llama/Meta-Llama-3-8B config.json), pure data parallelism with
#: Megatron-LM's distributed optimizer, bf16, full recomputation
MEGATRON_DP = ("--num-layers 32 --hidden-size 4096 --num-attention-heads 32 --group-query-attention "
               "--num-query-groups 8 --ffn-hidden-size 14336 --max-position-embeddings 8192 "
               "--seq-length 4096 --micro-batch-size 1 --global-batch-size 64 "
               "--tensor-model-parallel-size 1 --use-distributed-optimizer --bf16 "
               "--recompute-granularity full\n")
CLUSTER = {"gpu": "h100", "nodes": 8, "gpus_per_node": 8}  # 64 GPUs: dp 64


def _memory(settings):
    return estimate(build_scenario({**settings, **CLUSTER}), allow_oom=True)


def test_a_pure_data_parallel_megatron_job_counts_megatrons_distributed_optimizer(tmp_path):
    path = tmp_path / "train.args"
    path.write_text(MEGATRON_DP)
    settings = load_settings(path)
    assert settings["framework"] == "megatron"
    e = _memory(settings)
    m, P, d = e.memory, e.params, 64
    assert m.framework == "megatron"
    # Megatron-LM docs/user-guide/features/dist_optimizer.md: bf16 parameters with fp32 main
    # gradients, 6 + 12/d bytes a parameter: 2 (bf16 weights) + 4 (fp32 main-grad buffer, not
    # sharded) + 4/d (fp32 main weights) + 8/d (Adam's two fp32 moments)
    assert (m.weights, m.gradients, m.master, m.optimizer) == pytest.approx(
        (2 * P, 4 * P, 4 * P / d, 8 * P / d))
    # the plan alone (no tp/pp/cp/ep, ZeRO-1) implies DeepSpeed ZeRO-1: in bf16 that is its
    # ordinary ZeRO optimizer (DeepSpeed engine.py @56c5223, _configure_optimizer: the BF16
    # optimizer, with its fp32 gradient buffer, only without ZeRO), whose gradients are kept
    # in the weights' 16 bits: 2 bytes a parameter, against Megatron's fp32 main-grad 4
    implied = _memory({**settings, "framework": None})
    assert implied.memory.framework == "deepspeed"
    assert implied.memory.gradients == pytest.approx(2 * P)


def test_megatron_yaml_and_nemo_configs_are_megatron_jobs(tmp_path):
    yaml_cfg = tmp_path / "gpt_config.yaml"
    yaml_cfg.write_text("language_model:\n  num_layers: 32\n  hidden_size: 4096\n"
                        "  num_attention_heads: 32\nmodel_parallel:\n"
                        "  tensor_model_parallel_size: 1\n  bf16: true\nmicro_batch_size: 1\n"
                        "global_batch_size: 64\nseq_length: 2048\n")
    nemo = tmp_path / "megatron_gpt_config.yaml"
    nemo.write_text("trainer:\n  devices: 8\n  num_nodes: 8\n  precision: bf16\nmodel:\n"
                    "  micro_batch_size: 1\n  global_batch_size: 64\n"
                    "  tensor_model_parallel_size: 1\n  encoder_seq_length: 2048\n"
                    "  optim:\n    name: fused_adam\n")
    for path in (yaml_cfg, nemo):
        settings = load_settings(path)
        assert settings["framework"] == "megatron", path.name
        scenario = build_scenario({**settings, **CLUSTER, "model": "llama3-8b"})
        # pure data parallelism, no distributed optimizer: the plan alone would imply DDP
        assert (scenario.plan.tp, scenario.plan.zero) == (1, 0)
        assert scenario.plan.resolved_framework == "megatron"


@pytest.mark.parametrize("replicate, shard, tp, framework", [
    (1, -1, 1, "fsdp"),  # FSDP2 over every rank left over: ZeRO-3 (what the plan implies too)
    (32, 1, 2, "ddp"),   # replicate (DDP) x tensor parallel 2: the plan alone implies megatron
])
def test_a_torchtitan_job_is_fsdp2_when_sharded_and_ddp_otherwise(replicate, shard, tp, framework,
                                                                  tmp_path):
    path = tmp_path / "job.toml"
    path.write_text('[model]\nname = "llama3"\nflavor = "8B"\n[training]\nlocal_batch_size = 1\n'
                    f"seq_len = 2048\n[parallelism]\ndata_parallel_replicate_degree = {replicate}\n"
                    f"data_parallel_shard_degree = {shard}\ntensor_parallel_degree = {tp}\n")
    settings = load_settings(path)
    assert settings["framework"] == framework
    assert _memory(settings).memory.framework == framework


def test_the_framework_flag_overrides_the_job_file(tmp_path, capsys):
    path = tmp_path / "train.args"
    path.write_text(MEGATRON_DP)
    assert main(["estimate", str(path), "--gpu", "h100", "--nodes", "8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"]["framework"] == "megatron"
    assert main(["estimate", str(path), "--gpu", "h100", "--nodes", "8", "--json",
                 "--framework", "deepspeed"]) == 0
    assert json.loads(capsys.readouterr().out)["memory"]["framework"] == "deepspeed"
