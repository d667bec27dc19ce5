"""A Hugging Face model id found in the local Hugging Face cache (no network)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import willitscale as wis
from willitscale.workload.hfcache import hub_cache

DATA = Path(__file__).resolve().parents[1] / "data" / "hf_configs"


def cache_with(root: Path, model_id: str, config: Path, *, commit="0123abcd", main=True) -> None:
    """huggingface_hub's layout: models--ORG--NAME/{refs/main, snapshots/COMMIT/config.json}."""
    folder = root / ("models--" + model_id.replace("/", "--"))
    (folder / "snapshots" / commit).mkdir(parents=True)
    shutil.copy(config, folder / "snapshots" / commit / "config.json")
    if main:
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text(commit)


def test_cache_folder_follows_huggingface_hubs_variables(monkeypatch, tmp_path):
    for name in ("HF_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hub_cache() == tmp_path / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert hub_cache() == tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert hub_cache() == tmp_path / "hub"


def test_a_cached_model_id_is_the_same_shape_as_its_config_file(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    cache_with(tmp_path, "meta-llama/Meta-Llama-3-8B", DATA / "llama3-8b.json")
    model = wis.get_model("meta-llama/Meta-Llama-3-8B")
    direct = wis.load_hf_config(DATA / "llama3-8b.json")
    assert model.name == "meta-llama/Meta-Llama-3-8B"
    assert wis.param_count(model).total == wis.param_count(direct).total
    assert (model.layers, model.hidden, model.kv_heads) == (direct.layers, direct.hidden, direct.kv_heads)


def test_without_refs_main_the_snapshot_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    cache_with(tmp_path, "mistralai/Mistral-7B-v0.1", DATA / "mistral-7b.json", main=False)
    assert wis.get_model("mistralai/Mistral-7B-v0.1").hidden == wis.load_hf_config(
        DATA / "mistral-7b.json").hidden


def test_an_id_not_in_the_cache_says_where_it_looked_and_how_to_fetch(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(wis.ConfigError, match=r"does not hold it: `huggingface-cli download "
                                              r"org/absent config.json`"):
        wis.get_model("org/absent")


def test_a_missing_file_path_is_still_no_such_file(monkeypatch, tmp_path):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    with pytest.raises(wis.ConfigError, match="no such file"):
        wis.get_model("configs/missing.json")
