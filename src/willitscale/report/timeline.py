"""A step's timeline (:mod:`willitscale.estimation.timeline`) rendered as terminal lanes.

::

    data    [DL]
    compute [fwd][      bwd      ]            [opt]
    comms        [ar][ar][ar][ar][ar][ar][ar]
    idle                         [   idle    ]
            ----------------------------------------> time
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from willitscale.errors import ConfigError
from willitscale.estimation.timeline import LANES, Span, Timeline
from willitscale.units import format_time

__all__ = ["render_timeline", "check_width"]

_FILL = {"data": "=", "forward": "#", "backward": "#", "optimizer": "#", "comm": "~", "idle": ".",
         "bubble": "x"}
_LABEL = {"data": "DL", "forward": "fwd", "backward": "bwd", "optimizer": "opt",
          "comm": "comms", "idle": "idle", "bubble": "bubble"}


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

    left, right = "0", format_time(total)
    lines.append(f"{'':<8}{left}{right.rjust(width - len(left))}")
    if filled:
        glyphs = {}
        for kind in filled:
            glyphs.setdefault(_FILL[kind], []).append(_LABEL[kind])
        legend = ", ".join(f"{g} {'/'.join(names)}" for g, names in glyphs.items())
        lines.append(f"{'':<8}too short to label: {legend}")
    return "\n".join(lines)
