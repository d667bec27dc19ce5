"""Recomputation modes, named for what they rerun: which modules, on what share of the layers.

"Selective" means different things in different frameworks; each mode here says what it is:

=====================  =============================================================  ==========================
mode                   reruns in backward                                             as in
=====================  =============================================================  ==========================
``none``               nothing
``selective``          the attention core (Q K^T, softmax, dropout, A V) of every     Korthikanti et al. 2022,
                       layer: what FlashAttention already reruns                      section 5
``modules:a,b``        the named modules of every layer: ``core_attn`` (= selective),  Megatron-Core
                       ``mlp`` (the dense MLP), ``layernorm`` (the two norms, whose    ``--recompute-modules``
                       outputs are discarded and rebuilt)                              (default ``core_attn``)
``full``               the whole layer: only its input is kept                        Megatron ``full``
``layers:N``           the whole layer, for ``N`` layers of each pipeline stage; the   Megatron ``--recompute-
                       others keep everything                                         method block``
``every:K``            the whole layer, for every ``K``-th layer                      fms-fsdp ``p = 1/K``,
                                                                                      torchtitan ``"K"``
=====================  =============================================================  ==========================

A mode is a *rerun set* (an index into :data:`RERUN_SETS`, what one recomputed layer reruns)
and a *share of layers* (``layers`` per stage or ``every`` K-th; all by default). Memory
(:mod:`willitscale.memory.activations`) and FLOPs (:mod:`willitscale.workload.flops`) are
computed per rerun set; the share scales both on each pipeline stage (:func:`layer_share`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from willitscale.errors import ConfigError

__all__ = ["MODULES", "RERUN_SETS", "RecomputeMode", "parse_recompute", "rerun_modules",
           "layer_share", "BASE_MODES", "MODE_HELP"]

#: Megatron-Core ``--recompute-modules`` names this model covers (transformer_config.py
#: @d98e8a6: "core_attn", "mlp", "layernorm"; MoE and MLA modules are not modelled)
MODULES = ("core_attn", "layernorm", "mlp")

#: what one recomputed layer reruns; the first three keep the indices of the earlier
#: none / selective / full, so code that tests ``== 2`` for full still means it
RERUN_SETS = ("none", "selective", "full", "modules:layernorm", "modules:mlp",
              "modules:core_attn,layernorm", "modules:core_attn,mlp", "modules:layernorm,mlp",
              "modules:core_attn,layernorm,mlp")
#: the modes the estimate fits and the planner searches by default
BASE_MODES = ("none", "selective", "full")
MODE_HELP = ("none, selective (attention core), full, modules:core_attn,mlp,layernorm "
             "(Megatron-Core), layers:N (N layers per stage), every:K (every K-th layer)")


@dataclass(frozen=True, slots=True, kw_only=True)
class RecomputeMode:
    """A parsed recomputation mode (see the module docstring)."""

    rerun: str  #: one of RERUN_SETS
    layers: int = 0  #: recompute this many layers per pipeline stage (0: every layer)
    every: int = 1  #: recompute every K-th layer (1: every layer)

    def __post_init__(self):
        if self.rerun not in RERUN_SETS:
            raise ConfigError("recompute", self.rerun, "one of " + ", ".join(RERUN_SETS))
        if self.layers < 0 or self.every < 1 or (self.layers and self.every > 1):
            raise ConfigError("recompute", (self.layers, self.every),
                              "layers >= 0 and every >= 1, not both set")
        if (self.layers or self.every > 1) and self.rerun != "full":
            raise ConfigError("recompute", self.rerun, "full when layers or every is set")

    @property
    def name(self) -> str:
        if self.layers:
            return f"layers:{self.layers}"
        if self.every > 1:
            return f"every:{self.every}"
        return self.rerun


def _modules(text: str, original: str) -> str:
    names = sorted({m.strip() for m in text.split(",") if m.strip()})
    bad = [m for m in names if m not in MODULES]
    if bad or not names:
        raise ConfigError("recompute", original,
                          f"modules among {', '.join(MODULES)} (Megatron-Core names; MoE and MLA "
                          "modules are not modelled)")
    if names == ["core_attn"]:
        return "selective"
    return "modules:" + ",".join(names)


def _count(text: str, original: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ConfigError("recompute", original, f"{what} with an integer >= 1")
    return value


def parse_recompute(text: str) -> RecomputeMode:
    """A :class:`RecomputeMode` from its name (``MODE_HELP``); a ConfigError otherwise."""
    if not isinstance(text, str):
        raise ConfigError("recompute", text, MODE_HELP)
    t = text.strip()
    if t in ("none", "selective", "full"):
        return RecomputeMode(rerun=t)
    kind, _, rest = t.partition(":")
    if kind == "modules":
        return RecomputeMode(rerun=_modules(rest, text))
    if kind == "layers":
        return RecomputeMode(rerun="full", layers=_count(rest, text, "layers:N"))
    if kind == "every":
        k = _count(rest, text, "every:K")
        return RecomputeMode(rerun="full", every=k)
    raise ConfigError("recompute", text, MODE_HELP)


def rerun_modules(rerun: str) -> frozenset[str] | None:
    """The modules a rerun set reruns (None: the whole layer)."""
    if rerun == "full":
        return None
    if rerun == "none":
        return frozenset()
    if rerun == "selective":
        return frozenset({"core_attn"})
    return frozenset(rerun.partition(":")[2].split(","))


def layer_share(layers, recompute_layers, recompute_every):
    """Share of a stage's ``layers`` a mode recomputes (arrays broadcast): ``min(N, L) / L`` for
    ``layers:N``, ``ceil(L / K) / L`` for ``every:K`` (layers 0, K, 2K, ...), else 1."""
    L = np.asarray(layers, dtype=float)
    n = np.asarray(recompute_layers, dtype=float)
    k = np.asarray(recompute_every, dtype=float)
    safe = np.maximum(L, 1.0)
    share = np.where(n > 0, np.minimum(n, L) / safe, 1.0)
    return np.where(k > 1, np.ceil(L / np.maximum(k, 1.0)) / safe, share)
