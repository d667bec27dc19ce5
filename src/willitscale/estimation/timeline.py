"""A training step as data: spans on lanes, one representative GPU, one optimizer step.

The estimate builds a :class:`Timeline`; the terminal renderer (:mod:`willitscale.report.timeline`),
the Chrome/Perfetto exporter (:mod:`willitscale.report.trace`) and the plots all draw the *same*
spans. Lanes follow the diagrams of the networking handbook chapter ("Machine Learning
Engineering", Stas Bekman, chapter "Networking"): data loading, compute, communication, and the
idle time compute spends waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from willitscale.config import FrozenMap
from willitscale.errors import ConfigError
from willitscale.units import format_time

__all__ = ["KINDS", "LANES", "Span", "Timeline"]

#: what a span is doing; the renderer's fill character and the trace's category. ``bubble`` is
#: a pipeline stage waiting while the pipeline fills or drains (drawn on the idle lane).
KINDS = ("data", "forward", "backward", "optimizer", "comm", "idle", "bubble")
#: the lanes, top to bottom.
LANES = ("data", "compute", "comms", "idle")

@dataclass(frozen=True, slots=True, kw_only=True)
class Span:
    """One interval of one lane: ``[start, end)`` seconds from the start of the step."""

    lane: str
    kind: str
    name: str
    start: float
    end: float
    args: Any = field(default_factory=dict)  #: details for the trace viewer (bytes, link, ...)

    def __post_init__(self) -> None:
        if self.lane not in LANES:
            raise ConfigError("span lane", self.lane, "one of " + ", ".join(LANES))
        if self.kind not in KINDS:
            raise ConfigError("span kind", self.kind, "one of " + ", ".join(KINDS))
        if not (self.end >= self.start >= 0):
            raise ConfigError(f"span {self.name!r}: 0 <= start <= end", (self.start, self.end))
        object.__setattr__(self, "args", FrozenMap(dict(self.args)))

    @property
    def duration(self) -> float:
        return self.end - self.start

    def to_json(self) -> dict[str, Any]:
        return {"lane": self.lane, "kind": self.kind, "name": self.name, "start_s": self.start,
                "end_s": self.end, "args": dict(self.args)}


@dataclass(frozen=True, slots=True, kw_only=True)
class Timeline:
    """The spans of one step on one representative GPU, and the step's length."""

    spans: tuple[Span, ...]
    step_time: float  #: seconds; every span ends at or before it

    def __post_init__(self) -> None:
        object.__setattr__(self, "spans", tuple(self.spans))
        late = [s for s in self.spans if s.end > self.step_time * (1 + 1e-9) + 1e-12]
        if late:
            raise ConfigError(f"span {late[0].name!r} ends at {late[0].end} s, after the step "
                              f"({self.step_time} s)")

    def __repr__(self) -> str:
        lanes = sorted({s.lane for s in self.spans})
        return (f"Timeline({len(self.spans)} spans on lanes {', '.join(lanes) or 'none'}, "
                f"step {format_time(self.step_time)})")

    def lane(self, name: str) -> tuple[Span, ...]:
        return tuple(s for s in self.spans if s.lane == name)

    def busy(self, lane: str) -> float:
        """Seconds of ``lane``'s spans, summed. Compute, data and idle spans never overlap; comm
        spans of different collectives may (a model-parallel step runs them on several streams):
        then this is the collectives' busy time, not wall-clock time."""
        return sum(s.duration for s in self.lane(lane))

    def to_json(self) -> dict[str, Any]:
        return {"step_time_s": self.step_time, "spans": [s.to_json() for s in self.spans]}
