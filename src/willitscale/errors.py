"""The one error hierarchy. Everything a user can cause derives from :class:`WillItScaleError`.

The CLI prints ``error: <message>`` for these and exits with status 2 (1 for
:class:`Infeasible`, which is a verdict rather than a mistake, and for :class:`StoreError`, a
problem of the machine rather than of the input); it never shows a traceback.
``assert`` is reserved for internal invariants.

::

    WillItScaleError
    ├── ConfigError            bad input: names the field, the value and what would be valid
    │   └── UnknownNameError   a catalog name that does not exist, with the closest ones
    ├── Infeasible             a valid question whose answer is "cannot": out of memory, ...
    ├── BenchmarkError         a measurement could not be taken or is wrong
    ├── StoreError             the results store cannot be read or written (exit 1)
    └── MissingDependency      an optional extra (torch, matplotlib, ...) is not installed
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = [
    "shown_value",
    "WillItScaleError",
    "ConfigError",
    "UnknownNameError",
    "Infeasible",
    "BenchmarkError",
    "StoreError",
    "MissingDependency",
]


#: longest value an error message repeats whole; a longer one is cut and its length given
SHOWN_CHARS = 80


def shown_value(value: object) -> str:
    """``repr(value)``, cut to :data:`SHOWN_CHARS` with the full length said (a pasted
    5,000-character name must not become a 5,000-character message)."""
    text = repr(value)
    if len(text) <= SHOWN_CHARS:
        return text
    length = f"{len(value)} characters" if isinstance(value, str) else f"{len(text)} characters as text"
    return f"{text[:SHOWN_CHARS - 20]}... ({length})"


class WillItScaleError(Exception):
    """Base class of every error a user can cause; its message is written for that user."""

    exit_code = 2


class ConfigError(WillItScaleError):
    """Invalid input. ``ConfigError(field, value, expected)`` reads
    ``"<field> = <value> is not valid: expected <expected>"``; ``ConfigError(message)``
    is for errors that involve several fields (``tp*pp*dp = 48 but the cluster has 64 GPUs``).
    """

    def __init__(self, field_or_message: str, value: object = ..., expected: str | None = None):
        if value is ... and expected is None:
            self.field, self.value, self.expected = None, None, None
            message = field_or_message
        else:
            self.field, self.value, self.expected = field_or_message, value, expected
            message = f"{field_or_message} = {shown_value(value)} is not valid"
            if expected:
                message += f": expected {expected}"
        super().__init__(message)


class UnknownNameError(ConfigError):
    """A name that is not in a catalog; the message lists the closest known names."""

    def __init__(self, kind: str, name: str, known: Iterable[str]):
        known = sorted(known)
        self.kind, self.name, self.known = kind, name, known
        close = difflib.get_close_matches(name.lower(), [k.lower() for k in known], n=5, cutoff=0.5)
        by_lower = {k.lower(): k for k in known}
        suggestions = [by_lower[c] for c in close]
        if not suggestions:
            suggestions = [k for k in known if name.lower() in k.lower()][:5]
        if suggestions:
            hint = "did you mean " + ", ".join(suggestions) + "?"
        else:
            shown = ", ".join(known[:12]) + (", ..." if len(known) > 12 else "")
            plural = kind[:-1] + "ies" if kind.endswith("y") else kind + "s"  # entry -> entries
            hint = f"known {plural}: {shown}"
        super().__init__(f"unknown {kind} {shown_value(name)}: {hint}")


class Infeasible(WillItScaleError):
    """A well-formed question whose answer is "this cannot run", e.g. out of memory.

    ``reason`` is a short stable code (``"out_of_memory"``, ``"batch_not_divisible"``, ...)
    that the planner counts; the message explains it with the numbers. An ``Infeasible`` may be
    raised, or returned as a value where a caller wants to count rather than stop.
    """

    exit_code = 1

    def __init__(self, reason: str, message: str):
        self.reason = reason
        super().__init__(message)


class BenchmarkError(WillItScaleError):
    """A benchmark could not run, or measured something that fails its correctness check."""


class StoreError(WillItScaleError):
    """The results store cannot be read or written: damaged, written by a newer release, a full
    disk, a lock held too long. An environment problem, not bad input: exit status 1."""

    exit_code = 1


class MissingDependency(WillItScaleError):
    """An optional dependency is missing; the message says which extra installs it."""

    def __init__(self, package: str, extra: str, purpose: str):
        self.package, self.extra = package, extra
        super().__init__(
            f"{purpose} needs {package}, which is not installed. "
            f"Install it with: pip install 'willitscale[{extra}]'"
        )
