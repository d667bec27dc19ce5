"""NCCL as it runs a collective: which (algorithm, protocol) it picks, and how long it takes.

Two layers, kept apart on purpose:

1. **The pick** is NCCL's: its own cost model (:mod:`.model`, NCCL v2.30.7-1's tuning
   equations and constants) costs every enabled pair and NCCL runs the cheapest. Its predicted
   time is kept as ``predicted`` (``--json``: ``nccl_model_time_s``).
2. **The time** is what that pair achieves. NCCL's model is its tuning heuristic, not a
   measurement ("tuning.cc is full of empirical corrections", S. Jeaugey, NVIDIA/nccl#535);
   against published nccl-tests sweeps it is 20-45% optimistic between 1 and 64 MiB. The
   achieved time keeps NCCL's terms and corrects them with a few constants (:data:`ACHIEVED`)
   fitted to the *fit* rows of the validation set (src/willitscale/validation/nccl_tests.toml;
   fit by :mod:`willitscale.validation.nccl_fit`):

       t = lat[p] x (L - Lplugin) + plugin x Lplugin + T / eff[a]
           + ramp x L x T / (T + width x L) + overhead x (gpus per process - 1)

   with ``L`` NCCL's latency of the pair, ``Lplugin`` its share from the net plugin's reported
   latency (EFA), ``T = S / B`` its bandwidth time (tree correction included). ``ramp`` is the
   pipeline fill NCCL's model leaves out: once a message is large enough to stream
   (``T >> width x L``) it costs ``ramp x L`` more; below that, bytes move ``1 + ramp / width``
   times slower than the model says. The last term is nccl-tests' ``-g N`` mode (one process
   launching N GPUs); PyTorch runs one process per GPU.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

import numpy as np

from willitscale.collectives.nccl.model import PairCost, nccl_costs, pair_times
from willitscale.collectives.nccl.system import Graphs, NcclSystem, search_graphs
from willitscale.collectives.nccl.tables import NcclAlgorithm, Protocol
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError

__all__ = ["ACHIEVED", "Achieved", "NcclChoice", "achieved_times", "nccl_choice", "parse_nccl_algorithm",
           "parse_protocol"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Achieved:
    """The corrections from NCCL's predicted time to the achieved one (module docstring)."""

    latency_factor: tuple[float, float, float]  #: per protocol (LL, LL128, Simple)
    bandwidth_factor: Mapping[str, float]  #: per algorithm name; 1.0 for those not fitted
    ramp: float
    ramp_width: float
    plugin_latency_factor: float
    process_overhead: float  #: seconds per extra GPU one process launches
    source: str = ""

    def __post_init__(self) -> None:
        values = [*self.latency_factor, *self.bandwidth_factor.values(), self.ramp,
                  self.ramp_width, self.plugin_latency_factor]
        if len(self.latency_factor) != 3 or not all(v > 0 for v in values) or self.process_overhead < 0:
            raise ConfigError("Achieved", self, "three latency factors and positive constants")
        object.__setattr__(self, "bandwidth_factor", MappingProxyType(dict(self.bandwidth_factor)))

    def efficiency(self, algorithm: NcclAlgorithm) -> float:
        return self.bandwidth_factor.get(algorithm.value, 1.0)


#: Fitted by ``python -m willitscale.validation.nccl_fit`` on the fit rows graded "good" of
#: src/willitscale/validation/nccl_tests.toml (docs/collectives.md, "Validation").
#: 270 rows of 14 sweeps; rms of log(predicted / measured time) 0.21.
ACHIEVED = Achieved(
    latency_factor=(1.367, 1.256, 1.481),
    bandwidth_factor={"Ring": 1.02, "Tree": 0.9103, "NVLS": 0.9354, "NVLSTree": 1.004},
    ramp=2.534, ramp_width=6.613, plugin_latency_factor=0.5864, process_overhead=2.68e-06,
    source="fitted by willitscale.validation.nccl_fit on the 270 stable rows of the 14 fit-side "
           "sweeps graded good in validation/nccl_tests.toml",
)


def achieved_times(pairs, size, achieved: Achieved = ACHIEVED, *, gpus_per_process: int = 1) -> np.ndarray:
    """Seconds each pair (rows) achieves for ``size`` bytes (trailing shape), per :class:`Achieved`."""
    size = np.asarray(size, dtype=float)
    total = pair_times(pairs, size)
    rows = []
    for pair, t in zip(pairs, total, strict=True):
        latency, plugin = pair.latency_at(size)
        T = t - latency
        lat = achieved.latency_factor[pair.protocol] * (latency - plugin) + achieved.plugin_latency_factor * plugin
        ramp = achieved.ramp * latency * T / np.maximum(T + achieved.ramp_width * latency, 1e-300)
        rows.append(lat + T / achieved.efficiency(pair.algorithm) + ramp
                    + achieved.process_overhead * (gpus_per_process - 1))
    return np.stack(rows) if rows else np.zeros((0,) + size.shape)


_ALGORITHM_NAMES = {a.value.lower(): a for a in NcclAlgorithm}
_ALGORITHM_NAMES.update({"collnet_direct": NcclAlgorithm.COLLNET_DIRECT,
                         "collnet_chain": NcclAlgorithm.COLLNET_CHAIN, "nvls_tree": NcclAlgorithm.NVLS_TREE})
_PROTOCOL_NAMES = {p.label.lower(): p for p in Protocol}


def parse_nccl_algorithm(name: str, *, field: str = "algorithm") -> NcclAlgorithm:
    """NCCL's algorithm names, case-insensitive (``ring``, ``Tree``, ``NVLS``, ``nvlstree``...)."""
    key = str(name).strip().lower().replace("-", "_")
    if key in _ALGORITHM_NAMES:
        return _ALGORITHM_NAMES[key]
    raise ConfigError(field, name, "one of NCCL's " + ", ".join(a.value for a in NcclAlgorithm))


def parse_protocol(name: str, *, field: str = "protocol") -> Protocol:
    """NCCL's protocol names, case-insensitive: LL, LL128, Simple."""
    key = str(name).strip().lower()
    if key in _PROTOCOL_NAMES:
        return _PROTOCOL_NAMES[key]
    raise ConfigError(field, name, "one of LL, LL128, Simple")


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclChoice:
    """Every pair NCCL considers for one collective, at one or more sizes, and its pick."""

    op: Op
    system: NcclSystem
    graphs: Graphs
    pairs: tuple[PairCost, ...]
    size: np.ndarray  #: bytes (1-d)
    predicted: np.ndarray  #: NCCL's model, seconds, (pairs, sizes)
    achieved: np.ndarray  #: seconds, (pairs, sizes)
    index: np.ndarray  #: the pair NCCL picks per size
    forced: bool = False  #: an algorithm/protocol was given, or NCCL_ALGO / NCCL_PROTO removed a candidate
    notes: tuple[str, ...] = field(default=())

    @property
    def time(self) -> np.ndarray:
        """Achieved seconds of the picked pair per size."""
        return self.achieved[self.index, np.arange(self.size.size)]

    def ranking(self, k: int) -> list[int]:
        """Pairs by NCCL's predicted time at size index ``k``, the pick first."""
        order = np.argsort(self.predicted[:, k], kind="stable")
        return [int(i) for i in order]


def _filter(pairs, algorithm, protocol, op, system):
    kept = tuple(p for p in pairs if (algorithm is None or p.algorithm is algorithm)
                 and (protocol is None or p.protocol is protocol))
    if not kept:
        names = ", ".join(sorted({p.name for p in pairs})) or "none"
        want = "/".join(x for x in ((algorithm.value if algorithm else "*"),
                                    (protocol.label if protocol else "*")))
        raise ConfigError(f"NCCL cannot run {want} for {op.value} on {system.ranks} ranks "
                          f"({system.nodes} node(s) of {system.ranks_per_node}): it can run {names}")
    return kept


def nccl_choice(op: Op | str, size, system: NcclSystem, *, algorithm: str | None = None,
                protocol: str | None = None, gpus_per_process: int = 1,
                achieved: Achieved = ACHIEVED) -> NcclChoice:
    """NCCL's pick for ``op`` of ``size`` bytes (scalar or 1-d) on ``system`` and its times.

    ``algorithm``/``protocol`` restrict the candidates as ``NCCL_ALGO``/``NCCL_PROTO`` do; a
    pair NCCL cannot run here is a :class:`ConfigError` naming the ones it can.
    """
    op = Op(op)
    size = np.atleast_1d(np.asarray(size, dtype=float))
    if system.ranks < 2:
        raise ConfigError("ranks", system.ranks, "at least 2 for NCCL's model (one rank moves nothing)")
    if isinstance(gpus_per_process, bool) or not 1 <= gpus_per_process <= system.ranks_per_node:
        raise ConfigError("gpus_per_process", gpus_per_process, f"an integer in 1..{system.ranks_per_node}")
    graphs = search_graphs(system)
    pairs = nccl_costs(op, system, graphs)
    env, every = system.env, pairs
    if env.algorithms is not None or env.protocols is not None:  # NCCL_ALGO / NCCL_PROTO
        allowed = tuple(p for p in pairs if env.allows(p.algorithm, p.protocol))
        if not allowed:
            raise ConfigError(f"NCCL cannot run {op.value} with {env.describe()} on {system.ranks} ranks: "
                              "it can run " + ", ".join(p.name for p in pairs))
        pairs = allowed
    algo = parse_nccl_algorithm(algorithm) if algorithm else None
    proto = parse_protocol(protocol) if protocol else None
    pairs = _filter(pairs, algo, proto, op, system)
    predicted = pair_times(pairs, size)
    index = np.argmin(predicted, axis=0)  # strict: ties go to the first, as NCCL's
    return NcclChoice(op=op, system=system, graphs=graphs, pairs=pairs, size=size, predicted=predicted,
                      achieved=achieved_times(pairs, size, achieved, gpus_per_process=gpus_per_process),
                      index=index, forced=(algo is not None or proto is not None or len(pairs) < len(every)))
