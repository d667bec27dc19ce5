"""torchtitan job files: plan -> job TOML -> import gives the same plan and training settings;
torchtitan's own preset reads as its keys say; what torchtitan cannot express is refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

from willitscale.errors import ConfigError
from willitscale.scenario.build import build_scenario
from willitscale.scenario.plan import Plan
from willitscale.scenario.settings import load_settings
from willitscale.scenario.torchtitan import torchtitan_toml

CLUSTER = {"gpu": "h100", "nodes": 4, "gpus_per_node": 8}  # 32 GPUs; from flags, not the file

PLANS = [
    Plan(dp=32, micro_batch=2, grad_accum=2),                                 # DDP
    Plan(dp=32, zero=3, micro_batch=1, grad_accum=4, recompute="full"),       # FSDP
    Plan(dp=4, tp=8, zero=3, sequence_parallel=True, micro_batch=1, grad_accum=2,
         recompute="selective"),                                              # FSDP + TP/SP
    Plan(dp=2, tp=4, pp=4, sequence_parallel=True, micro_batch=1, grad_accum=8),  # 1F1B
    Plan(dp=4, tp=2, pp=4, sequence_parallel=True, micro_batch=2, grad_accum=8,
         pp_schedule="interleaved", virtual_stages=2),                        # interleaved
]


@pytest.mark.parametrize("plan", PLANS, ids=repr)
def test_plan_to_torchtitan_and_back_is_the_same_plan(plan, tmp_path):
    path = tmp_path / "job.toml"
    path.write_text(torchtitan_toml(plan, model="llama3-8b", layers=32, seq_len=8192, dtype="bf16"))
    settings = load_settings(path)
    scenario = build_scenario({**settings, **CLUSTER})
    # torchtitan runs FSDP2 (fully_shard) when it shards, replicate (DDP) otherwise: the memory
    # layout is that framework's, also where tp/pp alone would imply Megatron-LM's
    assert scenario.plan == replace(plan, framework="fsdp" if plan.zero == 3 else "ddp")
    assert (scenario.model.name, scenario.seq_len, scenario.dtype) == ("llama3-8b", 8192, "bf16")


def test_torchtitans_llama3_8b_preset_reads_as_its_keys_say(tmp_path):
    # torchtitan/models/llama3/train_configs/llama3_8b.toml (pytorch/torchtitan at commit
    # 01424cb254492cd6f5924e26d28227d75913e122), its model, training, parallelism and
    # activation_checkpoint tables as published ("a preset for 64 A100 GPUs")
    path = tmp_path / "llama3_8b.toml"
    path.write_text('[job]\ndump_folder = "./outputs"\ndescription = "Llama 3 8B training"\n\n'
                    '[model]\nname = "llama3"\nflavor = "8B"\n'
                    'tokenizer_path = "./assets/tokenizer/original/tokenizer.model"\n\n'
                    '[training]\nbatch_size = 1\nseq_len = 8192\nmax_norm = 1.0\nsteps = 1000\n'
                    'compile = false\ndataset = "c4"\n\n'
                    '[parallelism]\ndata_parallel_replicate_degree = 1\n'
                    'data_parallel_shard_degree = -1\ntensor_parallel_degree = 1\n'
                    'pipeline_parallel_degree = 1\ncontext_parallel_degree = 1\n\n'
                    "[activation_checkpoint]\nmode = 'selective'\nselective_ac_option = 'op'\n")
    settings = load_settings(path)
    assert settings["model"] == "llama3-8b" and settings["fsdp"] == "full"
    assert settings["micro_batch"] == 1 and settings["grad_accum"] == 1 and "dp" not in settings
    scenario = build_scenario({**settings, "gpu": "a100-80gb", "nodes": 8, "gpus_per_node": 8})
    # shard degree -1: every rank left over, 64; FSDP = ZeRO-3 over them; batch 1 per GPU
    assert scenario.plan == Plan(dp=64, zero=3, micro_batch=1, recompute="selective",
                                 framework="fsdp")
    assert scenario.seq_len == 8192


@pytest.mark.parametrize("plan, reason", [
    (Plan(dp=32, zero=1), "torchtitan has no ZeRO-1/2"),
    (Plan(dp=4, tp=8), "always runs the norms sequence-parallel"),
])
def test_plans_torchtitan_cannot_run_are_refused(plan, reason):
    with pytest.raises(ConfigError, match=reason):
        torchtitan_toml(plan, model="llama3-8b", layers=32, seq_len=8192, dtype="bf16")


def test_an_unmodelled_schedule_names_the_file_key_and_the_choices(tmp_path):
    path = tmp_path / "zb.toml"
    path.write_text('[parallelism]\npipeline_parallel_degree = 4\n'
                    'pipeline_parallel_schedule = "ZBVZeroBubble"\n')
    with pytest.raises(ConfigError, match=r"zb.toml: \[parallelism\]: pipeline_parallel_schedule "
                                          r"= 'ZBVZeroBubble' is not valid: expected one of 1F1B"):
        load_settings(path)


def test_plan_command_writes_a_job_file_estimate_reads(tmp_path, monkeypatch, capsys):
    from willitscale.cli.main import main

    monkeypatch.chdir(tmp_path)
    assert main(["plan", "--model", "llama3-8b", "--gpu", "h100", "--gpus", "16",
                 "--gpus-per-node", "8", "--global-batch", "64", "--seq-len", "8192",
                 "--top", "200", "--explain", "0", "--json", "--torchtitan", "job.toml"]) == 0
    import json

    # the fastest plan torchtitan can run: DDP or FSDP over all data-parallel ranks,
    # tensor parallel only with sequence parallelism, timed with the memory of the framework
    # torchtitan runs it with (FSDP2 sharded, DDP not)
    best = next(p for p in json.loads(capsys.readouterr().out)["plans"]
                if (p["zero"] == 0 or (p["zero"] == 3 and p["shard_scope"] == "dp"))
                and (p["tp"] == 1 or p["sequence_parallel"])
                and p["framework"] == ("fsdp" if p["zero"] == 3 else "ddp"))
    settings = load_settings(tmp_path / "job.toml")
    plan = build_scenario({**settings, "gpu": "h100", "nodes": 2, "gpus_per_node": 8}).plan
    for key in ("dp", "tp", "pp", "zero", "micro_batch", "grad_accum", "recompute"):
        assert getattr(plan, key) == best[key], key
