"""NCCL's environment settings the model applies, as NCCL applies them (NCCL v2.30.7-1,
commit 73cf112295c33aee2b895f329f592f2a9b4b0f97).

* ``NCCL_ALGO`` / ``NCCL_PROTO``: the algorithms / protocols NCCL may pick (src/graph/tuning.cc
  35-54 and 453-462: a comma list, or ``^`` then the ones to leave out; names case-insensitive).
  The per-function form (``allreduce:tree;...``) is not modelled and is refused.
* ``NCCL_MIN_CTAS`` / ``NCCL_MAX_CTAS`` (init.cc 1725-1726, 2013-2036, 2178-2194: each at most
  MAXCHANNELS = 64, the min lowered to the max when above it) and
  ``NCCL_MIN_NCHANNELS`` / ``NCCL_MAX_NCHANNELS`` (src/graph/connect.cc 331-360): the channels
  a communicator runs, ``comm->nChannels`` (connect.cc 501-505): first capped at
  ``min(MAX_NCHANNELS, MAX_CTAS)``, then copied up to ``max(MIN_NCHANNELS, MIN_CTAS)``. NCCL's
  tuner costs the search graph's channels, not these (tuning.cc 324), so they change NCCL's
  model only where it reads ``comm->nChannels``: the ring plateau test (tuning.cc 647-648) and
  the point-to-point channels (``p2pnChannels``, src/graph/paths.cc 978-991).
* The point-to-point knobs: ``NCCL_P2P_NVL_CHUNKSIZE`` / ``NCCL_P2P_NET_CHUNKSIZE`` /
  ``NCCL_P2P_PCI_CHUNKSIZE`` (init.cc 818-820), ``NCCL_BUFFSIZE`` (init.cc 813, the Simple
  buffer the chunk must fit 8 times, init.cc 842-843), ``NCCL_P2P_LL_THRESHOLD`` (enqueue.cc
  859), ``NCCL_MIN_P2P_NCHANNELS`` / ``NCCL_MAX_P2P_NCHANNELS`` (paths.cc 957-958),
  ``NCCL_NCHANNELS_PER_NET_PEER`` (init.cc 1729, paths.cc 943) and
  ``NCCL_P2P_PER_CHANNEL_NET_BW`` (paths.cc 918) -- see :mod:`.p2p`.

Any other key is refused with the list of the ones modelled (a flag the model does not apply
must not look applied).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from willitscale.collectives.nccl.tables import NcclAlgorithm, Protocol
from willitscale.errors import ConfigError

__all__ = ["NcclEnv", "ENV_KEYS", "parse_nccl_env", "MAXCHANNELS"]

#: NCCL's channel limit (src/include/device.h 91)
MAXCHANNELS = 64

_INT_KEYS = {
    "NCCL_MIN_CTAS": "min_ctas", "NCCL_MAX_CTAS": "max_ctas",
    "NCCL_MIN_NCHANNELS": "min_nchannels", "NCCL_MAX_NCHANNELS": "max_nchannels",
    "NCCL_P2P_NVL_CHUNKSIZE": "p2p_nvl_chunksize", "NCCL_P2P_NET_CHUNKSIZE": "p2p_net_chunksize",
    "NCCL_P2P_PCI_CHUNKSIZE": "p2p_pci_chunksize", "NCCL_BUFFSIZE": "buffsize",
    "NCCL_P2P_LL_THRESHOLD": "p2p_ll_threshold", "NCCL_MIN_P2P_NCHANNELS": "min_p2p_nchannels",
    "NCCL_MAX_P2P_NCHANNELS": "max_p2p_nchannels", "NCCL_NCHANNELS_PER_NET_PEER": "nchannels_per_net_peer",
    "NCCL_P2P_PER_CHANNEL_NET_BW": "p2p_per_channel_net_bw",
}
#: keys whose 0 the model would not apply as given (a chunk or buffer of 0 bytes, 0 channels or
#: 0 GB/s per network peer): refused rather than silently replaced by NCCL's default
_LEAST = {"NCCL_P2P_NVL_CHUNKSIZE": 1, "NCCL_P2P_NET_CHUNKSIZE": 1, "NCCL_P2P_PCI_CHUNKSIZE": 1,
          "NCCL_BUFFSIZE": 1, "NCCL_NCHANNELS_PER_NET_PEER": 1, "NCCL_P2P_PER_CHANNEL_NET_BW": 1}
#: every key :func:`parse_nccl_env` accepts
ENV_KEYS = ("NCCL_ALGO", "NCCL_PROTO", *_INT_KEYS)

_ALGO_NAMES = {a.value.lower(): a for a in NcclAlgorithm if a is not NcclAlgorithm.P2P}
_PROTO_NAMES = {p.label.lower(): p for p in Protocol}


@dataclass(frozen=True, slots=True, kw_only=True)
class NcclEnv:
    """The NCCL environment a communicator runs with; ``None``: NCCL's default."""

    algorithms: frozenset[NcclAlgorithm] | None = None  #: NCCL_ALGO: the ones enabled
    protocols: frozenset[Protocol] | None = None  #: NCCL_PROTO: the ones enabled
    min_ctas: int | None = None
    max_ctas: int | None = None
    min_nchannels: int | None = None
    max_nchannels: int | None = None
    p2p_nvl_chunksize: int | None = None
    p2p_net_chunksize: int | None = None
    p2p_pci_chunksize: int | None = None
    buffsize: int | None = None
    p2p_ll_threshold: int | None = None
    min_p2p_nchannels: int | None = None
    max_p2p_nchannels: int | None = None
    nchannels_per_net_peer: int | None = None
    p2p_per_channel_net_bw: int | None = None
    text: tuple[tuple[str, str], ...] = ()  #: the settings as given (KEY, VALUE), for reports

    def __post_init__(self) -> None:
        for key, name in _INT_KEYS.items():
            v, least = getattr(self, name), _LEAST.get(key, 0)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < least):
                raise ConfigError(key, v, f"an integer >= {least}")

    def runtime_channels(self, channels: int) -> int:
        """``comm->nChannels`` from the channels NCCL would run unset (connect.cc 501-505):
        capped at MAX_NCHANNELS and MAX_CTAS, then copied up to MIN_NCHANNELS / MIN_CTAS.
        MIN/MAX_CTAS at most 64, and MIN_CTAS lowered to MAX_CTAS above it (init.cc 2178-2194);
        MAX_NCHANNELS at least 1 and MIN_NCHANNELS at most 64 (connect.cc 334-360); a CTA
        setting <= 0 is ignored (init.cc 2015, 2027)."""
        max_ctas = min(self.max_ctas, MAXCHANNELS) if self.max_ctas else MAXCHANNELS
        min_ctas = min(self.min_ctas, MAXCHANNELS) if self.min_ctas else 1
        min_ctas = min(min_ctas, max_ctas)
        max_nch = MAXCHANNELS if self.max_nchannels is None else max(1, min(self.max_nchannels, MAXCHANNELS))
        min_nch = 0 if self.min_nchannels is None else min(self.min_nchannels, MAXCHANNELS)
        n = min(max_nch, channels, max_ctas)
        return max(n, min(max(min_nch, min_ctas), MAXCHANNELS))

    def allows(self, algorithm: NcclAlgorithm, protocol: Protocol) -> bool:
        """Whether NCCL_ALGO / NCCL_PROTO leave the pair enabled (point-to-point ignores both:
        NCCL does not tune it)."""
        if algorithm is NcclAlgorithm.P2P:
            return True
        return ((self.algorithms is None or algorithm in self.algorithms)
                and (self.protocols is None or protocol in self.protocols))

    def describe(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.text) or "NCCL defaults"


def _names(key: str, value: str, table: Mapping[str, object]) -> frozenset:
    text = str(value).strip()
    if ";" in text or ":" in text:
        raise ConfigError(key, value, "a comma list of names, or ^ and the names to leave out (the "
                          "per-function form 'allreduce:...' is not modelled)")
    exclude = text.startswith("^")
    names = [n.strip().lower() for n in text.lstrip("^").split(",") if n.strip()]
    unknown = [n for n in names if n not in table]
    if unknown or not names:
        raise ConfigError(key, value, "names among " + ", ".join(sorted(table)) + " (case-insensitive)")
    chosen = frozenset(table[n] for n in names)
    return frozenset(table.values()) - chosen if exclude else chosen


def parse_nccl_env(settings: Mapping[str, object] | Iterable[str] | None) -> NcclEnv:
    """An :class:`NcclEnv` from ``{"NCCL_MIN_CTAS": 24, ...}`` or ``["NCCL_MIN_CTAS=24", ...]``.
    An unknown key is a :class:`ConfigError` naming the keys modelled."""
    if not settings:
        return NcclEnv()
    if isinstance(settings, Mapping):
        items = [(str(k), v) for k, v in settings.items()]
    else:
        items = []
        for entry in settings:
            if "=" not in str(entry):
                raise ConfigError("nccl_env", entry, "KEY=VALUE, KEY one of " + ", ".join(ENV_KEYS))
            k, v = str(entry).split("=", 1)
            items.append((k.strip(), v.strip()))
    fields: dict = {}
    for key, value in items:
        key_u = key.upper()
        if key_u == "NCCL_ALGO":
            fields["algorithms"] = _names(key_u, str(value), _ALGO_NAMES)
        elif key_u == "NCCL_PROTO":
            fields["protocols"] = _names(key_u, str(value), _PROTO_NAMES)
        elif key_u in _INT_KEYS:
            try:
                number = int(str(value).strip())
            except ValueError:
                raise ConfigError(key_u, value, "an integer") from None
            fields[_INT_KEYS[key_u]] = number
        else:
            raise ConfigError("nccl_env", key, "one of the keys modelled: " + ", ".join(ENV_KEYS))
    return NcclEnv(**fields, text=tuple((k.upper(), str(v)) for k, v in items))
