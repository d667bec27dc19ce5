"""Published nccl-tests sweeps: the validation set of the NCCL collective model.

The data (``nccl_tests.toml`` beside this module) holds every row as published, with its
citation, and the fit/test split; the rule that made the split is written at the top of that
file, and :func:`derive_split` re-derives it so a test can check nobody moved a source. Rows are
:class:`Row` objects; :func:`rows` filters them by side, band and stability.

Never imported by the model core.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from importlib import resources

from willitscale.config import load_toml
from willitscale.errors import ConfigError

__all__ = ["BANDS", "FROZEN_SPLIT", "Row", "Sweep", "band_of", "derive_split", "load_sweeps", "parity_side",
           "rows", "rule3_split", "STABILITY_TOLERANCE"]

MiB = 1 << 20
GiB = 1 << 30
#: (name, lowest size, size bound) of each size band, rule 7 of the split
BANDS = (("< 1 MiB", 0, MiB), ("1-64 MiB", MiB, 64 * MiB), ("64 MiB-1 GiB", 64 * MiB, GiB),
         (">= 1 GiB", GiB, math.inf))
#: rule 4: a row whose out-of-place and in-place times differ by more than this is unstable
STABILITY_TOLERANCE = 0.25
SIDES = ("fit", "test", "excluded")


def band_of(size_bytes: float) -> str:
    """The size band of ``size_bytes`` (rule 7)."""
    for name, lo, hi in BANDS:
        if lo <= size_bytes < hi:
            return name
    raise ConfigError("size_bytes", size_bytes, "a size >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class Setup:
    """What a sweep is predicted on: a catalog node preset, nodes and ranks per node, and the
    forced algorithm or in-network reduction when the source set them."""

    preset: str
    nodes: int
    ranks_per_node: int
    processes: int | None = None  #: processes per node when one process drove several GPUs
    nic: str | None = None  #: a NIC other than the preset's, as the source states
    nics: int | None = None
    #: the NCCL environment settings the source states and the model applies ((KEY, VALUE)
    #: pairs; collectives/nccl/env.py), NCCL_ALGO among them
    nccl_env: tuple[tuple[str, str], ...] = ()
    collnet: bool = False  #: SHARP / CollNet enabled by the source
    note: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Sweep:
    id: str
    source_id: str
    op: str
    split: str
    stratum: str
    citation: str
    nccl_version: str
    flags_env: str
    quality: str
    use: bool
    setup: Setup
    rows: tuple[Row, ...]

    @property
    def ranks(self) -> int:
        return self.setup.nodes * self.setup.ranks_per_node


@dataclass(frozen=True, slots=True, kw_only=True)
class Row:
    """One published nccl-tests line (out-of-place columns; in-place time when published)."""

    sweep_id: str
    size_bytes: int
    time_us: float
    algbw_GBps: float
    busbw_GBps: float
    inplace_time_us: float | None = None
    stable: bool = True

    @property
    def band(self) -> str:
        return band_of(self.size_bytes)


def _setup(data: dict) -> Setup:
    fields = {k: v for k, v in data.items() if k in Setup.__slots__}
    if "nccl_env" in fields:
        fields["nccl_env"] = tuple((str(k), str(v)) for k, v in fields["nccl_env"].items())
    return Setup(**fields)


@cache
def load_sweeps() -> tuple[Sweep, ...]:
    """Every sweep of the validation set, in file order."""
    path = resources.files("willitscale.validation") / "nccl_tests.toml"
    data = load_toml(str(path))
    out = []
    for s in data["sweep"]:
        rows = tuple(Row(sweep_id=s["id"], size_bytes=int(r["size_bytes"]), time_us=float(r["time_us"]),
                         algbw_GBps=float(r["algbw_GBps"]), busbw_GBps=float(r["busbw_GBps"]),
                         inplace_time_us=r.get("inplace_time_us"), stable=bool(r["stable"]))
                     for r in s["rows"])
        out.append(Sweep(id=s["id"], source_id=s["source_id"], op=s["op"], split=s["split"],
                         stratum=s["stratum"], citation=s["citation"], nccl_version=s["nccl_version"],
                         flags_env=s["flags_env"], quality=s["quality"], use=bool(s["use"]),
                         setup=_setup(s["setup"]), rows=rows))
    return tuple(out)


def rows(side: str, *, min_size: float = 0, max_size: float = math.inf) -> Iterator[tuple[Sweep, Row]]:
    """``(sweep, row)`` for the stable rows of one side with ``min_size <= size < max_size``."""
    if side not in SIDES[:2]:
        raise ConfigError("side", side, "fit or test")
    for sweep in load_sweeps():
        if sweep.split != side:
            continue
        for row in sweep.rows:
            if row.stable and min_size <= row.size_bytes < max_size:
                yield sweep, row


def is_unstable(time_us: float, inplace_time_us: float | None) -> bool:
    """Rule 4: the source's own out-of-place and in-place times disagree by more than 25%."""
    if inplace_time_us is None or min(time_us, inplace_time_us) <= 0:
        return False
    return abs(time_us - inplace_time_us) / min(time_us, inplace_time_us) > STABILITY_TOLERANCE


#: Rule 3's assignment of the sources collected with the set (issue 12's research session), as
#: committed with the rule: FROZEN by the amendment (rule 3a, the header of nccl_tests.toml),
#: so that a source added later cannot move one of these between sides.
FROZEN_SPLIT = {
    "aws-adt-batch-readme": "fit", "aws-adt-nccl-readme": "fit", "azure-aml-ndv4-blog": "test",
    "coreweave-nccl-tests": "fit", "deepops-network-operator": "test", "deepops-roce-k8s": "fit",
    "deepops-slurm-perf": "fit", "dell-h200-openshift": "fit", "dstack-gcp": "test",
    "dstack-lambda": "fit", "dstack-nebius": "fit", "google-dranet": "test",
    "h100-nccl-howto": "test", "hetu-galvatron": "test", "li-plus-playground": "test",
    "nccl-tests-309-gj-aion": "test",
    "nccl-tests-309-qoofyk": "test", "nccl-tests-issue-290": "test", "oci-oke-readme-2024": "test",
    "oci-oke-slurm-doc": "fit", "skypilot-nebius": "fit", "thanos-a100-notes": "fit",
    "wutz-k8s-in-action": "fit", "ztan-a3mega": "fit",
}


def parity_side(source_id: str) -> str:
    """Rule 3a for a source added after the frozen table: test when the first 8 hex digits of
    sha256(source id) make an even number, else fit (as the compute split's rule 4)."""
    return "test" if int(hashlib.sha256(source_id.encode()).hexdigest()[:8], 16) % 2 == 0 else "fit"


def derive_split(sweeps=None) -> dict[str, str]:
    """The split by the rule as amended: ``{source id: "fit" | "test"}`` for every source with
    usable rows. A source of :data:`FROZEN_SPLIT` keeps its side; any other goes by
    :func:`parity_side` (rule 3a). :func:`rule3_split` is the original rule 3, which the frozen
    table reproduces on the sources it holds."""
    sweeps = load_sweeps() if sweeps is None else sweeps
    usable = {s.source_id for s in sweeps if s.use}
    return {source: FROZEN_SPLIT.get(source) or parity_side(source) for source in sorted(usable)}


def rule3_split(sweeps=None) -> dict[str, str]:
    """Rules 1-3 and 5 as first committed, applied afresh: ``{source id: "fit" | "test"}`` for
    every source with usable rows. A source's stratum is the one holding most of its usable rows
    (ties: alphabetical); within a stratum, sources in ascending sha256 of their id: the first to
    fit, each later one to the side with fewer usable rows so far (ties: test). Re-run on a set
    with a new source this can move an existing one (the row balance changes): hence rule 3a."""
    sweeps = load_sweeps() if sweeps is None else sweeps
    usable: dict[tuple[str, str], int] = {}
    for s in sweeps:
        if s.use:
            key = (s.source_id, s.stratum)
            usable[key] = usable.get(key, 0) + len(s.rows)
    stratum: dict[str, str] = {}
    total: dict[str, int] = {}
    for (source, st), count in sorted(usable.items()):
        total[source] = total.get(source, 0) + count
        if source not in stratum or count > usable[(source, stratum[source])]:
            stratum[source] = st
    side: dict[str, str] = {}
    for st in sorted(set(stratum.values())):
        load = {"fit": 0, "test": 0}
        members = sorted((s for s, t in stratum.items() if t == st),
                         key=lambda s: hashlib.sha256(s.encode()).hexdigest())
        for i, source in enumerate(members):
            pick = "fit" if i == 0 else ("test" if load["test"] <= load["fit"] else "fit")
            side[source] = pick
            load[pick] += total[source]
    return side
