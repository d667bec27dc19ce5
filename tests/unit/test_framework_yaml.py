"""Megatron-LM ``--yaml-cfg`` files and NeMo 1.x configs: plan -> file -> import gives the same
plan and training settings; the files' own layouts (keys as Megatron-LM's
examples/gpt3/gpt_config.yaml and NeMo's megatron_gpt_config.yaml spell them) read as those
projects define them; malformed files are errors naming the file, the key and what was expected."""

from __future__ import annotations

from dataclasses import replace

import pytest

import willitscale as wis
from willitscale.errors import ConfigError
from willitscale.scenario.build import build_scenario
from willitscale.scenario.megatron import JOB_FILE_SHAPE
from willitscale.scenario.megatron_yaml import megatron_yaml
from willitscale.scenario.nemo import nemo_yaml
from willitscale.scenario.plan import Plan
from willitscale.scenario.settings import load_settings

from megatron_plans import CLUSTER, PLANS


def _same(settings: dict, plan: Plan, dtype: str, cluster=CLUSTER) -> None:
    scenario = build_scenario({**settings, **cluster})
    # the file is a Megatron-LM (NeMo: Megatron-Core) job: its memory is Megatron's layout
    assert scenario.plan == replace(plan, framework="megatron")
    assert (scenario.model.name, scenario.seq_len, scenario.dtype) == ("llama3-70b", 4096, dtype)


@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
@pytest.mark.parametrize("plan", PLANS, ids=repr)
def test_plan_to_megatron_yaml_and_back_is_the_same_plan(plan, dtype, tmp_path):
    path = tmp_path / "gpt_config.yaml"
    path.write_text(megatron_yaml(plan, model=wis.get_model("llama3-70b"), seq_len=4096, dtype=dtype))
    _same(load_settings(path), plan, dtype)


@pytest.mark.parametrize("dtype", ["bf16", "fp32"])
@pytest.mark.parametrize("plan", PLANS, ids=repr)
def test_plan_to_nemo_yaml_and_back_is_the_same_plan_and_cluster_size(plan, dtype, tmp_path):
    path = tmp_path / "megatron_gpt_config.yaml"
    path.write_text(nemo_yaml(plan, model=wis.get_model("llama3-70b"), seq_len=4096, dtype=dtype,
                              nodes=8, gpus_per_node=8))
    settings = load_settings(path)
    assert (settings["nodes"], settings["gpus_per_node"]) == (8, 8)
    _same(settings, plan, dtype, cluster={"gpu": "h100"})


# Megatron-LM's examples/gpt3/gpt_config.yaml layout (NVIDIA/Megatron-LM @cc0bdc1), the values
# changed to a GPT-3 175B shape (Brown et al. 2020 Table 2.1: 96 layers, d_model 12288, 96
# heads) and a plan written here; keys not read (dropout, lr, ...) kept as that file has them.
MEGATRON_YAML = """\
# WARNING: Yaml configs is currently an experimental feature
language_model:
  num_layers: 96
  hidden_size: 12288
  num_attention_heads: 96
  num_query_groups: null
  ffn_hidden_size: null
  hidden_dropout: 0.0
  layernorm_epsilon: 1.e-5
  recompute_granularity: selective
  recompute_method: null
  recompute_num_layers: null
model_parallel:
  tensor_model_parallel_size: 8
  context_parallel_size: 1
  pipeline_model_parallel_size: 8
  virtual_pipeline_model_parallel_size: null
  sequence_parallel: True
  expert_model_parallel_size: 1
  fp16: False
  bf16: True
micro_batch_size: 1
global_batch_size: 1536
rampup_batch_size: [32, 32, 65324160]
num_layers_per_virtual_pipeline_stage: 4
max_position_embeddings: 4096
use_distributed_optimizer: True
seq_length: 2048
encoder_seq_length: null
lr: 2.5e-4
"""


def test_a_megatron_yaml_config_reads_as_megatron_defines_its_keys(tmp_path):
    path = tmp_path / "gpt_config.yaml"
    path.write_text(MEGATRON_YAML)
    settings = load_settings(path)
    # virtual stages: 96 layers / (pp 8 x 4 layers per virtual stage) = 3 chunks per rank
    assert {k: settings[k] for k in ("tp", "pp", "cp", "ep", "micro_batch", "global_batch",
                                     "seq_len", "recompute", "sequence_parallel", "dtype", "zero",
                                     "pp_schedule", "virtual_stages")} == {
        "tp": 8, "pp": 8, "cp": 1, "ep": 1, "micro_batch": 1, "global_batch": 1536,
        "seq_len": 2048, "recompute": "selective", "sequence_parallel": True, "dtype": "bf16",
        "zero": 1, "pp_schedule": "interleaved", "virtual_stages": 3}


def test_megatron_yaml_turns_sequence_parallel_off_at_tp_1_as_megatron_does(tmp_path):
    # the example file sets sequence_parallel: True with tensor_model_parallel_size: 1;
    # yaml_arguments.py sets it False when tp is 1
    path = tmp_path / "gpt_config.yaml"
    path.write_text(MEGATRON_YAML.replace("tensor_model_parallel_size: 8",
                                          "tensor_model_parallel_size: 1"))
    assert load_settings(path)["sequence_parallel"] is False


# NeMo's megatron_gpt_config.yaml layout (NVIDIA/NeMo @382c533, plus the 1.x keys named in
# scenario/nemo.py), Llama 3 70B's shape (Meta's config.json: 80 layers, 8192 hidden, 28672 FFN,
# 64 heads, 8 KV heads, 8192 positions) and a plan written here
NEMO_YAML = """\
name: megatron_gpt
trainer:
  devices: 8
  num_nodes: 16
  accelerator: gpu
  precision: bf16-mixed
  max_steps: 100000
model:
  micro_batch_size: 1
  global_batch_size: 512
  tensor_model_parallel_size: 4
  pipeline_model_parallel_size: 4
  virtual_pipeline_model_parallel_size: 5
  context_parallel_size: 2
  sequence_parallel: True
  encoder_seq_length: 8192
  max_position_embeddings: ${.encoder_seq_length}
  num_layers: 80
  hidden_size: 8192
  ffn_hidden_size: 28672
  num_attention_heads: 64
  num_query_groups: 8
  activations_checkpoint_granularity: full
  activations_checkpoint_method: block
  activations_checkpoint_num_layers: 2
  data:
    seq_length: ${model.encoder_seq_length}
  optim:
    name: distributed_fused_adam
    lr: 2e-4
"""


def test_a_nemo_config_reads_as_nemo_defines_its_keys(tmp_path):
    path = tmp_path / "megatron_gpt_config.yaml"
    path.write_text(NEMO_YAML)
    settings = load_settings(path)
    # the model shape the file states, kept to be checked against the model (a --model of
    # another shape is an error, not a substitute)
    assert settings.pop(JOB_FILE_SHAPE) == (str(path), {"layers": 80, "hidden": 8192, "heads": 64,
                                                        "ffn_hidden": 28672, "kv_heads": 8})
    assert settings == {
        "tp": 4, "pp": 4, "cp": 2, "micro_batch": 1, "global_batch": 512, "seq_len": 8192,
        "gpus_per_node": 8, "nodes": 16, "sequence_parallel": True, "dtype": "bf16", "zero": 1,
        "recompute": "layers:2", "pp_schedule": "interleaved", "virtual_stages": 5,
        "model": "llama3-70b", "framework": "megatron"}  # NeMo 1.x trains with Megatron-Core
    # 128 GPUs / (tp 4 x pp 4 x cp 2) = dp 4; 512 / (4 x 1) = 128 micro-batches per step
    plan = build_scenario({**settings, "gpu": "h100"}).plan
    assert (plan.dp, plan.grad_accum) == (4, 128)


@pytest.mark.parametrize("edit, message", [
    (("tensor_model_parallel_size: 4", "tensor_model_parallel_size: four"),
     r"megatron_gpt_config.yaml: model.tensor_model_parallel_size = 'four' is not valid: "
     r"expected an integer"),
    (("precision: bf16-mixed", "precision: tf32"),
     r"megatron_gpt_config.yaml: trainer.precision = 'tf32' is not valid: expected 16, 16, "),
    (("granularity: full", "granularity: most"),
     r"model.activations_checkpoint_granularity = 'most' is not valid: expected None, selective, full"),
    (("max_position_embeddings: ${.encoder_seq_length}",
      "max_position_embeddings: ${multiply:2, ${.encoder_seq_length}}"),
     r"model.max_position_embeddings = .* expected a value, or \$\{other.key\}"),
    (("devices: 8", "devices: -1"), r"trainer.devices = -1 is not valid: expected an integer >= 1"),
    (("  num_nodes: 16", "  num_nodes: 16\n   oops: 1"), r"megatron_gpt_config.yaml:5: not valid YAML"),
])
def test_a_malformed_nemo_config_names_the_file_and_key(edit, message, tmp_path):
    path = tmp_path / "megatron_gpt_config.yaml"
    path.write_text(NEMO_YAML.replace(*edit))
    with pytest.raises(ConfigError, match=message):
        load_settings(path)


@pytest.mark.parametrize("edit, message", [
    (("pipeline_model_parallel_size: 8", "pipeline_model_parallel_size: true"),
     r"gpt_config.yaml: model_parallel.pipeline_model_parallel_size = True is not valid: "
     r"expected an integer"),
    (("num_layers_per_virtual_pipeline_stage: 4", "num_layers_per_virtual_pipeline_stage: null"),
     None),  # no interleaving: fine
    (("virtual_pipeline_model_parallel_size: null", "virtual_pipeline_model_parallel_size: 3"),
     None),  # with num_layers_per_virtual_pipeline_stage given, Megatron derives it: fine
    (("recompute_granularity: selective", "recompute_granularity: some"),
     r"gpt_config.yaml: language_model.recompute_granularity = 'some' is not valid: expected "
     r"full or selective"),
    (("fp16: False", "fp16: True"), r"gpt_config.yaml: model_parallel.fp16 = True is not valid"),
    (("num_layers_per_virtual_pipeline_stage: 4", "num_layers_per_virtual_pipeline_stage: 5"),
     r"gpt_config.yaml: num_layers_per_virtual_pipeline_stage = 5 is not valid: expected a "
     r"divisor"),
])
def test_a_malformed_megatron_yaml_names_the_file_and_key(edit, message, tmp_path):
    path = tmp_path / "gpt_config.yaml"
    path.write_text(MEGATRON_YAML.replace(*edit))
    if message is None:
        load_settings(path)
        return
    with pytest.raises(ConfigError, match=message):
        load_settings(path)


def test_a_virtual_pipeline_size_megatron_would_overwrite_is_refused(tmp_path):
    path = tmp_path / "gpt_config.yaml"
    path.write_text(MEGATRON_YAML.replace("num_layers_per_virtual_pipeline_stage: 4", "")
                    .replace("virtual_pipeline_model_parallel_size: null",
                             "virtual_pipeline_model_parallel_size: 3"))
    with pytest.raises(ConfigError, match=r"model_parallel.virtual_pipeline_model_parallel_size = 3"
                                          r" is not valid: expected null"):
        load_settings(path)


def test_a_yaml_file_of_neither_framework_is_refused(tmp_path):
    path = tmp_path / "other.yaml"
    path.write_text("foo: 1\nbar: [1, 2]\n")
    with pytest.raises(ConfigError, match=r"other.yaml = 'foo, bar' is not valid: expected a "
                                          r"Megatron-LM YAML config"):
        load_settings(path)


def test_plans_megatron_cannot_run_are_refused_on_export():
    model = wis.get_model("llama3-8b")
    with pytest.raises(ConfigError, match="Megatron-LM shards optimizer state"):
        megatron_yaml(Plan(dp=64, zero=3), model=model, seq_len=8192, dtype="bf16")
    with pytest.raises(ConfigError, match="> 2 with the interleaved schedule"):
        megatron_yaml(Plan(dp=8, pp=2, pp_schedule="interleaved", virtual_stages=2), model=model,
                      seq_len=8192, dtype="bf16")
    with pytest.raises(ConfigError, match="1f1b or interleaved"):
        nemo_yaml(Plan(dp=8, pp=4, pp_schedule="gpipe"), model=model, seq_len=8192, dtype="bf16",
                  nodes=4, gpus_per_node=8)
    with pytest.raises(ConfigError, match="layers:N"):
        nemo_yaml(Plan(dp=8, recompute="every:2"), model=model, seq_len=8192, dtype="bf16",
                  nodes=1, gpus_per_node=8)


@pytest.mark.parametrize("flag", ["--nemo", "--megatron-yaml"])
def test_plan_writes_its_fastest_plan_and_the_file_reads_back_as_that_plan(flag, tmp_path, capsys):
    from willitscale.cli.main import main

    path = tmp_path / "job.yaml"
    assert main(["plan", "--model", "llama3-70b", "--gpu", "h100", "--gpus", "64",
                 "--gpus-per-node", "8", "--global-batch", "128", "--seq-len", "4096", "--top", "1",
                 "--explain", "0", flag, str(path)]) == 0
    said = capsys.readouterr().err
    written = said[said.index("Plan("):].strip()
    planned = eval(written, {"Plan": Plan})  # Plan's repr evaluates back (scenario/plan.py)
    settings = load_settings(path)
    cluster = {"gpu": "h100"} if flag == "--nemo" else CLUSTER
    scenario = build_scenario({**settings, **cluster})
    # the planner records the framework it timed the plan's memory with (Megatron's: plans
    # timed otherwise are not written); the file reads back as Megatron-LM's job
    assert planned.framework == "megatron" and scenario.plan == planned
    assert (scenario.model.name, scenario.seq_len, scenario.cluster.gpus) == ("llama3-70b", 4096, 64)


def test_a_stated_model_shape_is_never_replaced_by_another_model(tmp_path):
    # the NeMo file states llama3-70b's shape; with one layer fewer no catalog model has it:
    # an error naming the file's fields, with or without a --model of another shape
    path = tmp_path / "megatron_gpt_config.yaml"
    path.write_text(NEMO_YAML.replace("num_layers: 80", "num_layers: 79"))
    settings = load_settings(path)
    assert "model" not in settings
    with pytest.raises(ConfigError, match=r"model shape = 'layers=79, hidden=8192, .*none has it"):
        build_scenario({**settings, "gpu": "h100"})
    with pytest.raises(ConfigError, match=r"model shape = 'layers=79' is not valid: expected "
                                          r"llama3-70b's \(layers=80\)"):
        build_scenario({**settings, "gpu": "h100", "model": "llama3-70b"})
    # the file's own model, named again, is fine
    (tmp_path / "same.yaml").write_text(NEMO_YAML)
    same = load_settings(tmp_path / "same.yaml")
    assert build_scenario({**same, "gpu": "h100", "model": "llama3-70b"}).model.name == "llama3-70b"
