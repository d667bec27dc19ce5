"""The model catalog, Hugging Face configs and model TOML files."""

import json
from pathlib import Path

import pytest

from willitscale.errors import ConfigError, UnknownNameError
from willitscale.workload.catalog import get_model, list_models, model_aliases
from willitscale.workload.hf import HF_MODEL_TYPES, load_hf_config
from willitscale.workload.params import param_count

HF = Path(__file__).parent.parent / "data" / "hf_configs"

REQUIRED = {"gpt2", "gpt2-medium", "gpt2-large", "gpt2-xl", "gpt3-175b", "opt-175b", "bloom-176b",
            "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b", "llama3-70b", "llama3-405b",
            "mixtral-8x7b"}


def test_catalog_has_the_required_models_with_sources():
    names = {m.name for m in list_models()}
    assert REQUIRED <= names
    assert all(m.source for m in list_models())


def test_aliases_and_case():
    assert get_model("llama3.1-8b") is get_model("llama3-8b")
    assert get_model("GPT2-Large") is get_model("gpt2-large")
    assert all(get_model(alias).name == name for alias, name in model_aliases().items())


def test_unknown_name_suggests():
    with pytest.raises(UnknownNameError, match="llama2-7b"):
        get_model("llama2-7")


@pytest.mark.parametrize(("file", "catalog"), [
    ("gpt2-large.json", "gpt2-large"), ("llama2-7b.json", "llama2-7b"), ("llama3-8b.json", "llama3-8b"),
    ("mistral-7b.json", "mistral-7b"), ("qwen2-7b.json", "qwen2-7b"), ("mixtral-8x7b.json", "mixtral-8x7b"),
    ("deepseek-v3.json", "deepseek-v3"), ("qwen3-8b.json", "qwen3-8b"),
    ("qwen3-30b-a3b.json", "qwen3-30b-a3b"),
])
def test_hf_configs_match_the_catalog(file, catalog):
    loaded = load_hf_config(HF / file)
    assert param_count(loaded) == param_count(get_model(catalog))
    assert loaded.sliding_window == get_model(catalog).sliding_window
    # the same shape, field by field, but the training length (a config holds none; the catalog
    # takes the publisher's pretraining length)
    assert loaded.shape_dict() | {"seq_len": 0} == get_model(catalog).shape_dict() | {"seq_len": 0}


def test_get_model_accepts_paths_and_folders(tmp_path):
    folder = tmp_path / "Llama-2-7b-hf"
    folder.mkdir()
    (folder / "config.json").write_text((HF / "llama2-7b.json").read_text())
    assert get_model(str(folder)).name == "Llama-2-7b-hf"
    assert get_model(str(folder / "config.json")).name == "Llama-2-7b-hf"
    assert get_model(str(HF / "qwen2-7b.json")).name == "qwen2-7b"


def test_unknown_model_type_lists_supported(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "t5", "d_model": 512}))
    with pytest.raises(ConfigError) as info:
        load_hf_config(path)
    for supported in HF_MODEL_TYPES:
        assert supported in str(info.value)
    assert "'t5'" in str(info.value)


def test_missing_key_is_named(tmp_path):
    config = json.loads((HF / "llama3-8b.json").read_text())
    del config["intermediate_size"]
    path = tmp_path / "config.json"
    path.write_text(json.dumps(config))
    with pytest.raises(ConfigError, match="intermediate_size"):
        load_hf_config(path)


def test_bad_files(tmp_path):
    with pytest.raises(ConfigError, match="no such file"):
        load_hf_config(tmp_path / "nothing.json")
    bad = tmp_path / "config.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_hf_config(bad)


def test_llama_attention_bias_and_tied_small_model(tmp_path):
    # A Llama-style config with attention_bias and tied embeddings (as Llama 3.2 1B ties them):
    # biases on q, k, v and o add q + 2kv + h = 64 + 32 + 64 = 160 per layer (h 64, kv_dim 16).
    config = {"model_type": "llama", "num_hidden_layers": 1, "hidden_size": 64, "num_attention_heads": 8,
              "num_key_value_heads": 2, "intermediate_size": 96, "vocab_size": 100,
              "max_position_embeddings": 128, "tie_word_embeddings": True}
    plain, biased = tmp_path / "a.json", tmp_path / "b.json"
    plain.write_text(json.dumps(config))
    biased.write_text(json.dumps(config | {"attention_bias": True}))
    assert param_count(load_hf_config(biased)).total - param_count(load_hf_config(plain)).total == 160
    assert param_count(load_hf_config(plain)).lm_head == 0


def test_user_toml_model(tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('[tiny]\nsource = "mine"\nlayers = 2\nhidden = 64\nheads = 4\nvocab = 1000\n')
    assert get_model(str(path)).name == "tiny"
    path.write_text('[tiny]\nsource = "mine"\nlayers = 2\nhidden = 64\nheads = 4\nvocab = 1000\nlayer = 3\n')
    with pytest.raises(ConfigError, match="layer"):
        get_model(str(path))


def test_cli_convention_names_match_the_core():
    from willitscale.cli.model import CONVENTION_NAMES
    from willitscale.memory.state import CONVENTIONS

    assert set(CONVENTION_NAMES) == set(CONVENTIONS)


def test_extended_context_config_defaults_to_the_pretraining_length(tmp_path):
    # Llama 3.1 8B's config: max_position_embeddings 131072 with rope_scaling
    # original_max_position_embeddings 8192 (the length it was pretrained at, Dubey et al. 2024);
    # the default sequence length must be the 8192, not the 131072 context window.
    config = json.loads((HF / "llama3-8b.json").read_text())
    config |= {"max_position_embeddings": 131072,
               "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "original_max_position_embeddings": 8192}}
    folder = tmp_path / "Llama-3.1-8B"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps(config))
    model = get_model(str(folder))
    assert (model.max_positions, model.seq_len) == (131072, 8192)


def test_a_folder_on_disk_wins_over_a_catalog_alias(tmp_path, monkeypatch):
    # `./llama3-8b/config.json` exists: the user means that file, not the catalog entry.
    config = json.loads((HF / "llama3-8b.json").read_text()) | {"num_hidden_layers": 2}
    (tmp_path / "llama3-8b").mkdir()
    (tmp_path / "llama3-8b" / "config.json").write_text(json.dumps(config))
    monkeypatch.chdir(tmp_path)
    assert get_model("llama3-8b").layers == 2
    monkeypatch.chdir(tmp_path.parent)
    assert get_model("llama3-8b").layers == 32  # no such folder here: the catalog
