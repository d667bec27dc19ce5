"""Published training runs as data: :class:`PublishedRun` and :func:`load_runs`.

The rows live in ``data/*.toml``, one file per split group (:mod:`.split`), every row with its
citation, the number as published (``metric``, ``published``), which FLOPs the source counts,
what the source states and what had to be assumed, and the run as willitscale settings
(``[run.settings]``), or ``not_expressible = "why"`` when no setting expresses it (such rows
stay in the data and are reported, never dropped). docs/validation.md describes the format.

Metrics (the unit in the name): ``tokens_per_s_per_gpu``, ``tokens_per_s_total``, ``mfu`` and
``hfu`` (fractions of the dense peak), ``tflops_per_gpu`` (model FLOPs, as MFU counts them),
``hardware_tflops_per_gpu`` (executed FLOPs, recomputation included, as HFU counts them),
``step_time_s``; ``tflops_per_gpu_unspecified`` (a TFLOP/s whose FLOP convention the source
does not give: such a row is kept but cannot be compared).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files

from willitscale.config import FrozenMap, Table
from willitscale.errors import ConfigError
from willitscale.validation.published.split import SIDES, side_by_rule

__all__ = ["METRICS", "QUALITIES", "PublishedRun", "load_runs"]

METRICS = ("tokens_per_s_per_gpu", "tokens_per_s_total", "mfu", "hfu", "tflops_per_gpu",
           "hardware_tflops_per_gpu", "step_time_s", "tflops_per_gpu_unspecified")
QUALITIES = ("good", "fair", "weak")


@dataclass(frozen=True, slots=True, kw_only=True)
class PublishedRun:
    """One published training throughput and the run that produced it."""

    id: str
    name: str
    side: str  #: "fit" (may choose constants) or "test" (only checks them)
    split_group: str
    source: str  #: the citation: paper + table, or repository + commit + file
    quality: str  #: good, fair, weak (docs/validation.md)
    metric: str
    published: float
    shape: Mapping  #: ``{"catalog": name}`` or Transformer fields
    settings: Mapping | None  #: willitscale settings; None when not expressible
    not_expressible: str = ""  #: why no setting expresses the run ("" when one does)
    assumed: tuple[str, ...] = ()
    stated: tuple[str, ...] = ()
    extra: Mapping = field(default_factory=dict)  #: other published numbers of the same run
    note: str = ""
    wave1: bool = False  #: one of the goldens of wave 1 (tests/golden/test_published_runs.py)
    framework: str = ""  #: facts about how the run was executed, as the source says
    attention_kernel: str = ""
    fp8_recipe: str = ""
    compiled: bool = False  #: torch.compile (kernel fusion) used
    flops_convention: str = ""

    def __repr__(self) -> str:
        return (f"PublishedRun({self.id!r}: {self.metric} = {self.published:g}, {self.side} row, "
                f"{self.source[:60]!r})")

    def __post_init__(self) -> None:
        where = f"published run {self.id}"
        if self.side not in SIDES:
            raise ConfigError(f"{where}: side", self.side, "fit or test")
        if self.side != side_by_rule(self.split_group):
            raise ConfigError(f"{where}: side", self.side,
                              f"{side_by_rule(self.split_group)} (the split rule for "
                              f"{self.split_group}, docs/validation.md)")
        if self.metric not in METRICS:
            raise ConfigError(f"{where}: metric", self.metric, "one of " + ", ".join(METRICS))
        if self.quality not in QUALITIES:
            raise ConfigError(f"{where}: quality", self.quality, "good, fair or weak")
        if self.metric == "tflops_per_gpu_unspecified" and not self.not_expressible:
            raise ConfigError(f"{where}: a TFLOP/s of unstated convention cannot be compared: "
                              "give not_expressible")
        if (self.settings is None) == (not self.not_expressible):
            raise ConfigError(f"{where}: give settings or not_expressible, exactly one")
        for name in ("shape", "extra"):
            object.__setattr__(self, name, FrozenMap(dict(getattr(self, name))))
        if self.settings is not None:
            object.__setattr__(self, "settings", FrozenMap(dict(self.settings)))

    @property
    def calibrated_on(self) -> bool:
        """A fit row: constants may have been chosen looking at it."""
        return self.side == "fit"

    @property
    def expressible(self) -> bool:
        return self.settings is not None

    @property
    def gpu(self) -> str:
        s = self.settings or {}
        return str(s.get("gpu", "a100-80gb" if s.get("preset") == "dgx-a100" else ""))

    @property
    def dtype(self) -> str:
        return str((self.settings or {}).get("dtype", "bf16"))

    @property
    def seq_len(self) -> int:
        return int((self.settings or {}).get("seq_len", 0))


def _mapping(value) -> dict:
    if not isinstance(value, Mapping):
        raise TypeError
    return dict(value)


def _row(t: Table, shapes: Mapping[str, Mapping]) -> PublishedRun:
    model, shape_name = t.str("model", ""), t.str("shape", "")
    if bool(model) == bool(shape_name):
        raise ConfigError(f"{t.where}: give model (a catalog name) or shape, exactly one")
    if shape_name and shape_name not in shapes:
        raise ConfigError(f"{t.where}: shape", shape_name, "a [shape.NAME] table of its file")
    shape = {"catalog": model} if model else {"name": shape_name, **shapes[shape_name]}
    settings = t.get("settings", _mapping, "a table of willitscale settings", None)
    extra = t.get("extra", _mapping, "a table of numbers", None)
    run = PublishedRun(
        id=t.str("id"), name=t.str("name", "") or t.str("id"), side=t.str("side"),
        split_group=t.str("split_group"), source=t.str("citation"), quality=t.str("quality"),
        metric=t.str("metric"), published=t.float("published", positive=True), shape=shape,
        settings=settings,
        not_expressible=t.str("not_expressible", ""), assumed=tuple(t.list("assumed", [])),
        stated=tuple(t.list("stated", [])),
        extra={k: float(v) for k, v in (extra or {}).items()},
        note=t.str("note", ""), wave1=t.bool("wave1", False), framework=t.str("framework", ""),
        attention_kernel=t.str("attention_kernel", ""), fp8_recipe=t.str("fp8_recipe", ""),
        compiled=t.bool("compile", False), flops_convention=t.str("flops_convention", ""))
    for key in ("source_id", "url", "quote", "source_intra_node", "source_inter_node",
                "source_sharding", "source_recompute"):
        t.str(key, "")  # provenance kept in the data for readers; not used by the model
    t.done()
    return run


@cache
def load_runs() -> tuple[PublishedRun, ...]:
    """Every published run of ``data/*.toml``, in file order (files sorted by name)."""
    runs: list[PublishedRun] = []
    for path in sorted(files(__package__).joinpath("data").iterdir(), key=lambda p: p.name):
        if not path.name.endswith(".toml"):
            continue
        import tomllib

        data = tomllib.loads(path.read_text(encoding="utf-8"))
        shapes = {name: {k: v for k, v in s.items() if k != "source"}
                  for name, s in data.get("shape", {}).items()}
        runs += [_row(Table(r, f"{path.name}: run {i + 1}"), shapes)
                 for i, r in enumerate(data.get("run", []))]
    ids = [r.id for r in runs]
    if len(set(ids)) != len(ids):
        raise ConfigError("published runs: ids", sorted({i for i in ids if ids.count(i) > 1}),
                          "unique ids")
    return tuple(runs)
