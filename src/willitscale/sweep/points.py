"""What one point of a sweep computes, for each kind of grid: the settings it takes (each checked
alone when the grid is read) and the row of results it gives.

* ``fabric``: a flow-level simulation, as ``willitscale fabric simulate`` runs it: a topology
  (``topology`` and its builder's parameters, link speeds ``nic``/``nvlink``/``uplink``), a
  ``routing`` and, with ``traffic = "collective"`` (the default), one ``collective`` of ``size``
  over every GPU, or with ``traffic = "step"`` one training step's TP/CP/EP/PP/DP traffic
  (degrees, ``*_bytes``, ``*_count``, ``order``). Seeded: the seed is the routing's hash seed.
  ``fidelity`` (``auto``, ``exact``, ``coarse``) as ``fabric simulate --fidelity``; the row's
  ``fidelity_ran`` column says which one ran (``auto`` runs coarse above 16,384 GPUs).
* ``estimate``: ``willitscale estimate`` of a scenario given by the settings of a scenario file
  (:data:`willitscale.scenario.settings.SETTINGS`, flat: ``model``, ``gpu``, ``nodes``, ``tp``, ...).

A point that cannot run (degrees that do not fit the cluster, a layout larger than the fabric)
gives a row whose ``error`` says why, and its result columns empty: it is a finished point. An
estimate whose plan does not fit in memory is not an error: its row has the numbers, with
``fits_in_memory`` False and ``bottleneck`` "out of memory".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from willitscale.errors import ConfigError, WillItScaleError

__all__ = ["KINDS", "Kind", "evaluate"]


def _int(value: Any, *, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(field, value, "an integer")
    try:
        number = int(value)
    except ValueError:
        raise ConfigError(field, value, "an integer") from None
    if number != float(value) or number < 0:
        raise ConfigError(field, value, "an integer >= 0")
    return number


def _float(value: Any, *, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ConfigError(field, value, "a number")
    try:
        number = float(value)
    except ValueError:
        raise ConfigError(field, value, "a number") from None
    if not number > 0 or number == float("inf"):
        raise ConfigError(field, value, "a number > 0")
    return number


def _text(choices: tuple[str, ...] | None = None) -> Callable[..., str]:
    def parse(value: Any, *, field: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ConfigError(field, value, "a non-empty string" + (": " + ", ".join(choices) if choices else ""))
        if choices and value.strip().lower() not in choices:
            raise ConfigError(field, value, "one of " + ", ".join(choices))
        return value.strip()
    return parse


def _size(value: Any, *, field: str) -> float:
    from willitscale.units import parse_size

    return parse_size(value, field=field, unit_required=True)


def _bandwidth(value: Any, *, field: str) -> float:
    from willitscale.units import parse_bandwidth

    return parse_bandwidth(value, field=field)


def _dims(value: Any, *, field: str) -> tuple[int, ...]:
    parts = value if isinstance(value, list) else str(value).lower().split("x")
    try:
        dims = tuple(_int(x, field=field) for x in parts)
    except ConfigError:
        raise ConfigError(field, value, "sizes joined by x, such as 4x4x4, or a list [4, 4, 4]") from None
    return dims


def _bool(value: Any, *, field: str) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(field, value, "true or false")
    return value


_FABRIC_INTS = ("k", "tiers", "nodes", "gpus_per_node", "radix", "spines", "groups", "routers_per_group",
                "global_links", "nodes_per_router", "channels", "tp", "cp", "ep", "dp", "pp",
                "tp_count", "cp_count", "ep_count", "pp_count")
#: fabric settings -> parser(value, field=...)
FABRIC_SETTINGS: dict[str, Callable[..., Any]] = {
    "topology": _text(("nvswitch", "rail-optimized", "rail-only", "fat-tree", "dragonfly", "torus")),
    **{name: _int for name in _FABRIC_INTS},
    "oversubscription": _float, "top_oversubscription": _float, "dims": _dims,
    "nic": _bandwidth, "nvlink": _bandwidth, "uplink": _bandwidth,
    "routing": _text(("ecmp", "spray", "adaptive", "rail")), "pxn": _bool,
    "traffic": _text(("collective", "step")),
    "collective": _text(), "size": _size, "algorithm": _text(),
    "placement": _text(),
    **{f"{d}_bytes": _size for d in ("tp", "cp", "ep", "pp", "dp")},
    "order": _text(),
    "fidelity": _text(("auto", "exact", "coarse")),
}
_TOPOLOGY_PARAMS = ("k", "tiers", "nodes", "gpus_per_node", "radix", "spines", "groups", "routers_per_group",
                    "global_links", "nodes_per_router", "oversubscription", "top_oversubscription", "dims")
_FABRIC_COLUMNS = ("completion_time_s", "busbw_GBps", "stream_times_s", "max_link_utilization",
                   "mean_link_utilization", "steps_simulated", "solves", "fidelity_ran")


def _fabric_topology(s: Mapping[str, Any]):
    from willitscale.topology.links import FabricLinks
    from willitscale.topology.spec import KIND_PARAMS, TopologySpec

    kind = s.get("topology", "rail-optimized").lower()
    params = {k: s[k] for k in _TOPOLOGY_PARAMS if k in s}
    for name, default in (("nodes", 16), ("gpus_per_node", 8)):  # as `fabric simulate` defaults them
        if name in KIND_PARAMS.get(kind, ()) and not (kind == "fat-tree" and name == "nodes"):
            params.setdefault(name, default)
    links = FabricLinks(**{f"{name}_bandwidth": s[name] for name in ("nic", "nvlink", "uplink") if name in s})
    return TopologySpec(kind=kind, params=params, links=links).build()


def _step_traffic(topo, s: Mapping[str, Any]):
    from willitscale.fabric.step import DIMS, ParallelLayout, StepComm, step_traffic

    order = tuple(x.strip().lower() for x in s.get("order", ",".join(DIMS)).split(","))
    layout = ParallelLayout(**{d: s.get(d, 1) for d in DIMS}, order=order)
    comm = StepComm(**{f"{d}_bytes": s.get(f"{d}_bytes", 0.0) for d in DIMS},
                    **{f"{d}_count": s.get(f"{d}_count", 1) for d in DIMS if d != "dp"})
    return step_traffic(topo, layout, comm, channels=s.get("channels", 1), algorithm=s.get("algorithm"))


def _fabric_row(settings: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    from willitscale.fabric.collective import simulate_collective
    from willitscale.fabric.report import link_report
    from willitscale.fabric.simulator import simulate
    from willitscale.topology.routing import parse_routing

    s = {name: FABRIC_SETTINGS[name](value, field=name) for name, value in settings.items()}
    topo = _fabric_topology(s)
    routing = parse_routing(s.get("routing", "ecmp"), seed=seed or 0, pxn=s.get("pxn", False))
    busbw, fidelity = None, s.get("fidelity", "auto").lower()
    if s.get("traffic", "collective") == "step":
        res = simulate(topo, _step_traffic(topo, s), routing, fidelity=fidelity)
    else:
        if "size" not in s:
            raise ConfigError("size", None, "the collective's size with a unit, e.g. '1GB' (traffic = 'collective')")
        kw = {k: s[k] for k in ("algorithm", "placement", "channels") if k in s}
        rep = simulate_collective(topo, s.get("collective", "all_reduce"), s["size"], routing=routing,
                                  fidelity=fidelity, **kw)
        res, busbw = rep.result, rep.busbw / 1e9
    links = link_report(res)
    return {"completion_time_s": res.completion_time, "busbw_GBps": busbw,
            "stream_times_s": ";".join(f"{k}={v!r}" for k, v in res.stream_times.items()),
            "max_link_utilization": links.max_utilization, "mean_link_utilization": links.mean_utilization,
            "steps_simulated": res.steps_simulated, "solves": res.solves, "fidelity_ran": res.fidelity}


_ESTIMATE_COLUMNS = ("step_time_s", "mfu", "tokens_per_s", "memory_per_gpu_bytes", "fits_in_memory",
                     "exposed_comms_s", "bubble_s", "bottleneck")


def _estimate_check(name: str, value: Any, *, field: str) -> Any:
    from willitscale.scenario.settings import SETTINGS, parse_setting

    if name not in SETTINGS:
        import difflib

        close = difflib.get_close_matches(name, list(SETTINGS), n=3)
        raise ConfigError(field, value, "a scenario setting" + (f" (did you mean {', '.join(close)}?)"
                                                               if close else ": " + ", ".join(SETTINGS)))
    return parse_setting(name, value, field=field)


def _estimate_row(settings: Mapping[str, Any], seed: int | None) -> dict[str, Any]:
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario
    from willitscale.scenario.settings import parse_setting

    # a plan out of memory still gets its numbers: fits_in_memory False, bottleneck "out of memory"
    est = estimate(build_scenario({k: parse_setting(k, v) for k, v in settings.items()}), allow_oom=True)
    return {"step_time_s": est.step_time, "mfu": est.mfu, "tokens_per_s": est.tokens_per_s,
            "memory_per_gpu_bytes": est.memory_per_gpu, "fits_in_memory": est.memory.fits,
            "exposed_comms_s": est.breakdown.exposed_comms, "bubble_s": est.breakdown.bubble,
            "bottleneck": est.bottleneck.resource}


def _estimate_paths(settings: Mapping[str, Any], base: str) -> dict[str, Any]:
    """``settings`` with relative file paths read from ``base`` (the grid file's folder), as a
    scenario file's are: ``calibration`` always; ``model`` when it names a file there or ends in
    ``.json``/``.toml`` (a catalog name or Hugging Face id stays as written)."""
    from pathlib import Path

    out = dict(settings)
    for name in ("model", "calibration"):
        value = out.get(name)
        if not isinstance(value, str) or not value.strip() or Path(value.strip()).expanduser().is_absolute():
            continue
        text = value.strip()
        there = Path(base) / text
        if name == "calibration" or text.endswith((".json", ".toml")) or there.is_file() or \
                (there / "config.json").is_file():
            out[name] = str(there)
    return out


def _fabric_check(name: str, value: Any, *, field: str) -> Any:
    if name not in FABRIC_SETTINGS:
        import difflib

        close = difflib.get_close_matches(name, list(FABRIC_SETTINGS), n=3)
        raise ConfigError(field, value, "a fabric setting" + (f" (did you mean {', '.join(close)}?)" if close
                                                             else ": " + ", ".join(FABRIC_SETTINGS)))
    return FABRIC_SETTINGS[name](value, field=field)


@dataclass(frozen=True, slots=True)
class Kind:
    """A kind of grid: how to check one setting, the result columns, how to run one point."""

    check: Callable[..., Any]  #: check(name, value, field=...) -> parsed value; raises ConfigError
    columns: tuple[str, ...]
    row: Callable[[Mapping[str, Any], int | None], dict[str, Any]]
    seeded: bool  #: whether points take a routing seed
    #: settings with relative file paths read from a folder (the grid file's); None: no paths
    paths: Callable[[Mapping[str, Any], str], Mapping[str, Any]] | None = None


KINDS: dict[str, Kind] = {
    "fabric": Kind(_fabric_check, _FABRIC_COLUMNS, _fabric_row, seeded=True),
    "estimate": Kind(_estimate_check, _ESTIMATE_COLUMNS, _estimate_row, seeded=False, paths=_estimate_paths),
}


def evaluate(kind: str, settings: Mapping[str, Any], seed: int | None, *,
             base: str | None = None) -> tuple[dict[str, Any], str]:
    """``(results, error)`` of one point: the result columns, or empty ones and why it cannot run.
    ``base``: the folder relative file paths in ``settings`` are read from (default: the cwd)."""
    paths = KINDS[kind].paths
    if base is not None and paths is not None:
        settings = paths(settings, base)
    try:
        return KINDS[kind].row(settings, seed), ""
    except WillItScaleError as exc:
        return dict.fromkeys(KINDS[kind].columns), f"{type(exc).__name__}: {exc}"
