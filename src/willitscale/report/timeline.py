"""A training step as data: a list of spans on lanes, and its rendering as terminal lanes.

The estimate builds a :class:`Timeline` (one representative GPU, one optimizer step); the text
renderer here, the Chrome/Perfetto exporter in :mod:`willitscale.report.trace` and later plots
all draw the *same* spans. Lanes follow the diagrams of the networking handbook chapter
(seeds/000): data loading, compute, communication, and the idle time compute spends waiting.

::

    data    [DL]
    compute [fwd][      bwd      ]            [opt]
    comms        [ar][ar][ar][ar][ar][ar][ar]
    idle                         [   idle    ]
            ----------------------------------------> time
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from willitscale.errors import ConfigError

__all__ = ["KINDS", "LANES", "Span", "Timeline", "render_timeline"]

#: what a span is doing; the renderer's fill character and the trace's category. ``bubble`` is
#: a pipeline stage waiting while the pipeline fills or drains (drawn on the idle lane).
KINDS = ("data", "forward", "backward", "optimizer", "comm", "idle", "bubble")
#: the lanes, top to bottom.
LANES = ("data", "compute", "comms", "idle")

_FILL = {"data": "=", "forward": "#", "backward": "#", "optimizer": "#", "comm": "~", "idle": ".",
         "bubble": "x"}
_LABEL = {"data": "DL", "forward": "fwd", "backward": "bwd", "optimizer": "opt",
          "comm": "comms", "idle": "idle", "bubble": "bubble"}


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
        object.__setattr__(self, "args", MappingProxyType(dict(self.args)))

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

    def lane(self, name: str) -> tuple[Span, ...]:
        return tuple(s for s in self.spans if s.lane == name)

    def busy(self, lane: str) -> float:
        """Seconds of ``lane``'s spans, summed. Compute, data and idle spans never overlap; comm
        spans of different collectives may (a model-parallel step runs them on several streams):
        then this is the collectives' busy time, not wall-clock time."""
        return sum(s.duration for s in self.lane(lane))

    def to_json(self) -> dict[str, Any]:
        return {"step_time_s": self.step_time, "spans": [s.to_json() for s in self.spans]}


def _label(span: Span) -> str:
    """A block's text: the kind's, or for micro-batches merged into one span, how many."""
    n = span.args.get("micro_batches") if span.args else None
    return f"{n} x fwd+bwd" if n else _LABEL[span.kind]


def _merged(spans: Sequence[Span], gap: float) -> list[tuple[float, float, str, str]]:
    """Adjacent spans of the same kind closer than ``gap`` merge into one block (for display):
    ``(start, end, kind, label)``."""
    blocks: list[tuple[float, float, str, str]] = []
    for span in sorted(spans, key=lambda s: s.start):
        if blocks and blocks[-1][2] == span.kind and span.start - blocks[-1][1] <= gap:
            start, end, kind, label = blocks[-1]
            blocks[-1] = (start, max(span.end, end), kind, label)
        else:
            blocks.append((span.start, span.end, span.kind, _label(span)))
    return blocks


def _draw(row: list[str], lo: int, hi: int, kind: str, label: str) -> bool:
    """Draw one block; True when it was too narrow for its label (drawn as fill glyphs)."""
    width = hi - lo
    if width <= 0:
        return False
    if width >= len(label) + 2:
        text = "[" + label.center(width - 2) + "]"
    elif width >= 2:
        text = "[" + _FILL[kind] * (width - 2) + "]"
    else:
        text = _FILL[kind]
    row[lo:hi] = list(text)
    return width < len(label) + 2


MIN_WIDTH = 20  #: the narrowest timeline whose axis labels still fit


def check_width(width: int, field: str = "width") -> int:
    """``width`` if a timeline can be drawn that wide, else the error naming ``field``."""
    if isinstance(width, bool) or width < MIN_WIDTH:
        raise ConfigError(field, width, f"at least {MIN_WIDTH} characters")
    return width


def render_timeline(timeline: Timeline, *, width: int = 72, lanes: Iterable[str] = LANES) -> str:
    """The step as text lanes (one line per non-empty lane) above a time axis.

    Spans shorter than one character still show as one character, so a brief exposed
    all-reduce is never invisible; neighbouring spans of one kind merge into one block.
    """
    check_width(width)
    total = timeline.step_time
    scale = width / total if total > 0 else 0.0
    lines = []
    filled: dict[str, None] = {}  # kinds drawn as glyphs, too narrow for a label (in order)
    for lane in lanes:
        spans = [s for s in timeline.lane(lane) if s.duration > 0]
        if not spans:
            continue
        row = [" "] * width
        for start, end, kind, label in _merged(spans, gap=0.5 / scale if scale else 0.0):
            lo = min(width - 1, int(start * scale + 0.5))
            hi = max(lo + 1, min(width, int(end * scale + 0.5)))
            if _draw(row, lo, hi, kind, label):
                filled[kind] = None
        lines.append(f"{lane:<8}{''.join(row).rstrip()}")
    axis = "-" * (width - 6) + "> time"
    lines.append(f"{'':<8}{axis}")
    from willitscale.units import format_time

    left, right = "0", format_time(total)
    lines.append(f"{'':<8}{left}{right.rjust(width - len(left))}")
    if filled:
        glyphs = {}
        for kind in filled:
            glyphs.setdefault(_FILL[kind], []).append(_LABEL[kind])
        legend = ", ".join(f"{g} {'/'.join(names)}" for g, names in glyphs.items())
        lines.append(f"{'':<8}too short to label: {legend}")
    return "\n".join(lines)
