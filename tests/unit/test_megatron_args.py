"""Megatron-LM command lines: plan -> flags -> import gives the same plan and training settings;
a launch script's flags read as Megatron-LM defines them; what it cannot say is refused."""

from __future__ import annotations

from dataclasses import replace

import pytest

import willitscale as wis
from willitscale.errors import ConfigError
from willitscale.scenario.build import build_scenario
from willitscale.scenario.megatron import megatron_args
from willitscale.scenario.plan import Plan
from willitscale.scenario.settings import load_settings

from megatron_plans import CLUSTER, PLANS


@pytest.mark.parametrize("plan", PLANS, ids=repr)
def test_plan_to_megatron_flags_and_back_is_the_same_plan(plan, tmp_path):
    model = wis.get_model("llama3-70b")
    path = tmp_path / "train.sh"
    path.write_text("#!/bin/bash\ntorchrun --nproc-per-node 8 pretrain_gpt.py \\\n"
                    + megatron_args(plan, model=model, seq_len=4096, dtype="bf16"))
    settings = load_settings(path)
    scenario = build_scenario({**settings, **CLUSTER})
    assert scenario.plan == replace(plan, framework="megatron")  # a Megatron-LM job's memory
    assert (scenario.model.name, scenario.seq_len, scenario.dtype) == ("llama3-70b", 4096, "bf16")


def test_a_launch_script_reads_as_megatron_defines_its_flags(tmp_path):
    # flags as Megatron-LM's arguments.py spells them; the shape is GPT-3 175B's (Brown et al.
    # 2020 Table 2.1: 96 layers, d_model 12288, 96 heads, 2048 tokens), the plan written here
    script = tmp_path / "run.sh"
    script.write_text(
        "#!/bin/bash\n# a comment --tensor-model-parallel-size 99 is not a flag\n"
        "GPT_ARGS=\"--num-layers 96 --hidden-size 12288 --num-attention-heads 96\"\n"
        "torchrun $DISTRIBUTED_ARGS pretrain_gpt.py \\\n"
        "    --tensor-model-parallel-size 8 --pipeline-model-parallel-size=8 \\\n"
        "    --micro-batch-size 1 --global-batch-size 1536 --seq-length 2048 \\\n"
        "    --recompute-activations --sequence-parallel --fp16 --lr 6.0e-5\n")
    settings = load_settings(script)
    assert {k: settings[k] for k in ("tp", "pp", "micro_batch", "global_batch", "seq_len",
                                     "recompute", "sequence_parallel", "dtype", "zero")} == {
        "tp": 8, "pp": 8, "micro_batch": 1, "global_batch": 1536, "seq_len": 2048,
        "recompute": "selective", "sequence_parallel": True, "dtype": "fp16", "zero": 0}


def test_a_shell_variable_as_a_value_names_the_flag(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("python pretrain_gpt.py --tensor-model-parallel-size $TP --micro-batch-size 1\n")
    with pytest.raises(ConfigError, match=r"run.sh: --tensor-model-parallel-size = '\$TP' is not "
                                          r"valid: expected an integer"):
        load_settings(script)


def test_zero_3_cannot_be_written_as_megatron_flags():
    with pytest.raises(ConfigError, match="Megatron-LM shards optimizer state"):
        megatron_args(Plan(dp=64, zero=3), model=wis.get_model("llama3-8b"), seq_len=8192, dtype="bf16")
