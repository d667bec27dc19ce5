"""A Hugging Face model id (``meta-llama/Meta-Llama-3-8B``) found in the local Hugging Face cache,
without the network: the cache's layout is huggingface_hub's (``models--ORG--NAME/refs/main``
holds the commit of ``main``, ``snapshots/COMMIT/config.json`` the file), in ``$HF_HUB_CACHE``,
else ``$HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub``, else
``~/.cache/huggingface/hub`` (huggingface_hub's documented defaults,
https://huggingface.co/docs/huggingface_hub/package_reference/environment_variables)."""

from __future__ import annotations

import os
import re
from pathlib import Path

__all__ = ["MODEL_ID", "hub_cache", "cached_config"]

#: ORG/NAME, as the Hub spells model ids
MODEL_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[\w.-]+$")


def hub_cache() -> Path:
    """The folder huggingface_hub caches models in, by its environment variables."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"]).expanduser()
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]).expanduser() / "hub"
    base = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    return Path(base).expanduser() / "huggingface" / "hub"


def cached_config(model_id: str) -> Path | None:
    """The cached ``config.json`` of ``model_id`` (main's snapshot, else the newest), or None."""
    folder = hub_cache() / ("models--" + model_id.replace("/", "--"))
    snapshots = folder / "snapshots"
    main = folder / "refs" / "main"
    if main.is_file():
        config = snapshots / main.read_text().strip() / "config.json"
        if config.is_file():
            return config
    found = sorted(snapshots.glob("*/config.json"), key=lambda p: p.stat().st_mtime) \
        if snapshots.is_dir() else []
    return found[-1] if found else None
