"""What each benchmark script reports at the end: its headline figures, and the goal each meets.

A script calls :func:`emit` once with its :class:`Headline` figures: they are printed under its
detailed output, and written as JSON to the file named by ``WILLITSCALE_BENCH_HEADLINES`` when
``benchmarks/run.py`` runs the script (each in its own process) and collects them.
Not a benchmark itself (the runner skips files starting with ``_``).
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import asdict, dataclass

__all__ = ["Headline", "emit", "long_flag", "HEADLINES_ENV"]

HEADLINES_ENV = "WILLITSCALE_BENCH_HEADLINES"


@dataclass(frozen=True)
class Headline:
    """One figure: ``value`` in ``unit``; ``at_least``/``at_most`` is the goal, when there is one."""

    name: str
    value: float
    unit: str
    at_least: float | None = None
    at_most: float | None = None
    digits: int = 3  #: significant digits to print

    @property
    def goal(self) -> str:
        if self.at_least is not None:
            return f">= {_number(self.at_least, 3)} {self.unit}"
        if self.at_most is not None:
            return f"< {_number(self.at_most, 3)} {self.unit}"
        return ""

    @property
    def met(self) -> bool | None:
        """True/False against the goal; None without one."""
        if self.at_least is not None:
            return self.value >= self.at_least
        if self.at_most is not None:
            return self.value < self.at_most
        return None

    def text(self) -> str:
        mark = {True: "  [goal met: ", False: "  [GOAL MISSED: ", None: ""}[self.met]
        goal = f"{mark}{self.goal}]" if self.met is not None else ""
        return f"{self.name}: {self.value_text()}{goal}"

    def value_text(self) -> str:
        number = _number(self.value, self.digits)
        return number + ("x" if self.unit == "x" else f" {self.unit}" if self.unit else "")


def _number(x: float, digits: int) -> str:
    if x == 0:
        return "0"
    if abs(x) >= 10 ** digits:
        return f"{x:,.0f}"
    return f"{x:.{digits}g}"


def emit(headlines: list[Headline]) -> None:
    """Print the headline figures; hand them to the runner when it asked for them."""
    print("headline figures:")
    for h in headlines:
        print(f"  {h.text()}")
    path = os.environ.get(HEADLINES_ENV)
    if path:
        with open(path, "w", encoding="utf-8") as f:
            json.dump([{**asdict(h), "goal": h.goal, "met": h.met} for h in headlines], f)
    sys.stdout.flush()


def long_flag(parser) -> None:
    """``--long``: the slower, larger version of a benchmark (``run.py --long`` passes it)."""
    parser.add_argument("--long", action="store_true",
                        help="the long version: larger batches, more repeats, bigger cases")
