"""Where a line of prose breaks when it is wider than the terminal: between phrases, not inside
them.

A plain word wrap breaks wherever the width runs out: ``2.55`` on one line and ``GiB`` on the
next, a parenthesis split after its first word. :func:`line_breaks` prefers, among the spaces
that fit, the one that ends a phrase (after ``;``, ``:``, ``.``, ``,``, ``·`` or ``->``, before
``(`` or ``—``), as long as the line stays at least :data:`MIN_FILL` full; it avoids breaking
inside parentheses and never separates a number from its unit when there is another choice.
Continuation lines are indented (``hang``) so they read as one item. Pure: no rich, no I/O.
"""

from __future__ import annotations

import re

__all__ = ["MIN_FILL", "line_breaks", "wrap_lines"]

#: a line may end at a phrase boundary once it is this full (else the last space that fits)
MIN_FILL = 0.4

_SPACES = re.compile(r" +")
_NUMBER = re.compile(r"^[~<>≈+-]?[\d][\d.,]*%?$")
_UNIT = re.compile(r"^[A-Za-z/µ][A-Za-z/µ0-9^]{0,7}[,;:.)]?$")
_ENDS_PHRASE = (";", ":", ".", ",", "·", "->", "→", "—")
_OPENERS, _CLOSERS = tuple("([{"), tuple(")]}")

#: penalties of a break at a space: lower is better
BEST, GOOD, PLAIN, INSIDE, NEVER = 0, 1, 2, 4, 9


def _penalty(before: str, after: str, depth: int) -> int:
    """How bad a break between the words ``before`` and ``after`` is (``depth``: open brackets)."""
    if _NUMBER.match(before) and _UNIT.match(after):
        return NEVER  # "2.55 GiB", "176 ms", "32 GPUs"
    if before.endswith(_ENDS_PHRASE) or after.startswith("—"):
        penalty = BEST if before.endswith((";", ":", ".", "·", "->", "→", "—")) else GOOD
    elif after.startswith(_OPENERS) or before.endswith(_CLOSERS):
        penalty = GOOD
    else:
        penalty = PLAIN
    return penalty + (INSIDE if depth > 0 else 0)


def _candidates(text: str) -> list[tuple[int, int, int]]:
    """``(end of line, start of next line, penalty)`` for every run of spaces between words."""
    out = []
    depth = 0
    last = 0
    for m in _SPACES.finditer(text):
        if m.start() == 0 or m.end() == len(text):
            continue
        before = text[text.rfind(" ", 0, m.start()) + 1:m.start()]
        nxt = text.find(" ", m.end())
        after = text[m.end():nxt if nxt > 0 else len(text)]
        for ch in text[last:m.start()]:
            depth += (ch in _OPENERS) - (ch in _CLOSERS)
        depth = max(depth, 0)
        last = m.start()
        out.append((m.start(), m.end(), _penalty(before, after, depth)))
    return out


def line_breaks(text: str, width: int, *, hang: int = 2) -> list[tuple[int, int]]:
    """``(start, end)`` of each line ``text`` (one line, no newline) wraps into at ``width``
    columns, continuation lines indented by ``hang`` spaces (not included in the spans)."""
    if width < 1:
        raise ValueError(f"width must be >= 1, not {width}")
    spans: list[tuple[int, int]] = []
    candidates = _candidates(text)
    start, first = 0, True
    while True:
        room = width if first else max(width - hang, 1)
        if len(text) - start <= room:
            spans.append((start, len(text)))
            return spans
        fitting = [c for c in candidates if start < c[0] <= start + room and c[1] > start]
        if not fitting:  # one word longer than the line: cut it
            end = start + room
            spans.append((start, end))
            start, first = end, False
            continue
        full = [c for c in fitting if c[0] - start >= MIN_FILL * room] or fitting[-1:]
        end, nxt, _ = min(full, key=lambda c: (c[2], -c[0]))
        spans.append((start, end))
        start, first = nxt, False


def wrap_lines(text: str, width: int) -> list[str]:
    """``text`` wrapped at ``width``: each line's continuations indented by its own leading
    spaces plus two (at most half the width)."""
    out = []
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        hang = min(indent + 2, width // 2)
        spans = line_breaks(line, width, hang=hang)
        out += [(" " * hang if i else "") + line[a:b] for i, (a, b) in enumerate(spans)]
    return out
