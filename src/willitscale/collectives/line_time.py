"""Collective time lines over many plans: :class:`CollectiveLines` and :func:`line_time`.

Plans share few group geometries, so the lines are tables with one row per distinct geometry
and one column per candidate (an alpha-beta algorithm, or an NCCL (algorithm, protocol) pair),
and ``geometry`` maps each plan to its row. Each column's *choice* time is NCCL's model (or the
alpha-beta form)::

    choice(S) = L' + slope x S / corr(S)      L' = intercept x (plateau_factor if S >= plateau)

(``corr`` is NCCL's tree correction, 1 elsewhere). The candidate picked per element is the
fastest (``tolerance`` 0: strictly, ties to the first column, as NCCL) or the first within
``tolerance`` of it (the alpha-beta rule of :func:`willitscale.collectives.fastest`). Its time
is the *achieved* time of :mod:`willitscale.collectives.nccl.run` for NCCL columns (``terms``)::

    t = lat (L' - P') + plugin P' + T x inv_eff + ramp L' T / (T + width L')      T = slope S / corr

and the choice time itself for plain columns. Where ``measured`` holds a line for the (row,
column) chosen (a calibration's ``[[collective]]`` entry, :mod:`willitscale.collectives.measured_lines`),
the time is that line, ``a + b x S``, in place of the achieved time; the choice is unchanged (a
measurement does not change what NCCL runs).

``contention`` (per table row and column, default 1) multiplies the bytes term ``T`` of the
*achieved* time only: a simulated fabric's slowdown of the group's transfers
(:mod:`willitscale.step.flow_network`). The choice is made without it, as NCCL picks by its
own tuning model, which does not see the fabric's other traffic.

:func:`line_time` evaluates each distinct (geometry, size) pair once: a bucket layout shared by
thousands of plans costs a handful of evaluations.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from willitscale.collectives.choice import DEFAULT_TOLERANCE
from willitscale.collectives.nccl.tables import TREE_CORRECTION

__all__ = ["CollectiveLines", "LineTerms", "line_time", "take_lines", "select_lines", "pair_time",
           "with_contention"]

_CORRECTION = np.array([row + (1.0,) for row in TREE_CORRECTION], dtype=float)  # (3, 25)


@dataclass(frozen=True, slots=True, kw_only=True)
class LineTerms:
    """Per-column constants of NCCL columns (arrays of shape ``(columns,)``)."""

    plateau_factor: np.ndarray
    correction: np.ndarray  #: protocol index of the tree correction, -1 none
    correction_sizes: np.ndarray  #: powers of two the correction covers
    latency_factor: np.ndarray
    plugin_factor: np.ndarray
    inv_efficiency: np.ndarray
    ramp: np.ndarray
    width: np.ndarray

    @staticmethod
    def plain(columns: int) -> LineTerms:
        one, zero = np.ones(columns), np.zeros(columns)
        return LineTerms(plateau_factor=one, correction=-np.ones(columns, dtype=int),
                         correction_sizes=np.zeros(columns, dtype=int), latency_factor=one,
                         plugin_factor=one, inv_efficiency=one, ramp=zero, width=one)

    def join(self, other: LineTerms) -> LineTerms:
        return LineTerms(**{f: np.concatenate([getattr(self, f), getattr(other, f)])
                            for f in self.__slots__})


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveLines:
    """Choice lines per geometry (table rows) and candidate (columns), and for NCCL the
    achieved-time terms; ``geometry`` gives each plan's row (None: plan ``i`` is row ``i``)."""

    op: str
    algorithms: tuple[str, ...]  #: column names ("ring", "Ring/LL128", "gloo ring", ...)
    intercept: np.ndarray  #: seconds, (rows, columns); inf: the candidate cannot run there
    slope: np.ndarray  #: seconds per byte, (rows, columns)
    plateau: np.ndarray | None = None  #: bytes from which the latency grows, (rows, columns)
    plugin: np.ndarray | None = None  #: seconds of the intercept from the net plugin, (rows, columns)
    terms: LineTerms | None = None  #: None: plain lines (time = choice time)
    tolerance: float = DEFAULT_TOLERANCE
    geometry: np.ndarray | None = None  #: (plans,) table row of each plan
    #: (rows, columns) factor >= 1 on the achieved bytes term (a simulated fabric's slowdown of
    #: the candidate's traffic pattern); None: 1
    contention: np.ndarray | None = None
    #: (rows, columns, 2): a measured line (seconds, seconds per byte) timing that candidate
    #: when it is chosen; NaN where none was measured
    measured: np.ndarray | None = None

    @property
    def plans(self) -> int:
        return self.intercept.shape[0] if self.geometry is None else self.geometry.shape[0]

    def rows_of_plans(self) -> np.ndarray:
        return np.arange(self.intercept.shape[0]) if self.geometry is None else self.geometry

    def full(self) -> CollectiveLines:
        """The same lines with every optional array present (for joining)."""
        shape = self.intercept.shape
        return replace(self, plateau=np.full(shape, np.inf) if self.plateau is None else self.plateau,
                       plugin=np.zeros(shape) if self.plugin is None else self.plugin,
                       terms=LineTerms.plain(shape[1]) if self.terms is None else self.terms,
                       contention=np.ones(shape) if self.contention is None else self.contention,
                       measured=np.full(shape + (2,), np.nan) if self.measured is None else self.measured,
                       geometry=self.rows_of_plans())


def _correction(k: np.ndarray, protocol: np.ndarray, sizes: np.ndarray) -> np.ndarray:
    """Tree-correction factors (elements x columns); 1 where a column has none or a size is
    outside the powers of two it covers."""
    covered = (k[:, None] >= 0) & (k[:, None] < sizes[None, :]) & (protocol[None, :] >= 0)
    idx = np.where(covered, np.clip(k, 0, 23)[:, None], 24).astype(int)
    return _CORRECTION[np.maximum(protocol, 0)[None, :], idx]


def _evaluate(lines: CollectiveLines, rows: np.ndarray, s: np.ndarray):
    """(time, index) for 1-d arrays of table rows and sizes."""
    L, slope = lines.intercept[rows], lines.slope[rows]
    terms = lines.terms
    S = s[:, None]
    if terms is not None and lines.plateau is not None:
        L = np.where(S >= lines.plateau[rows], L * terms.plateau_factor, L)
    T = slope * S
    if terms is not None and (terms.correction >= 0).any():
        k = np.floor(np.log2(np.maximum(s, 1.0) / 64.0))
        T = T / _correction(k, terms.correction, terms.correction_sizes)
    with np.errstate(invalid="ignore"):
        choice = L + T
    if lines.tolerance:
        limit = np.min(choice, axis=1, keepdims=True) * (1 + lines.tolerance) + 1e-300
        index = np.argmax(choice <= limit, axis=1)
    else:
        index = np.argmin(choice, axis=1)  # strict: ties to the first column, as NCCL
    at = np.arange(len(s))
    c = 1.0 if lines.contention is None else lines.contention[rows, index]
    if terms is None:
        time = L[at, index] + T[at, index] * c
    else:
        time = _achieved(lines, terms, rows, index, L[at, index], T[at, index] * c)
    if lines.measured is not None:
        line = lines.measured[rows, index]
        # a measurement on a quiet fabric, slowed by the simulated fabric's contention as the
        # model's bytes term is (the latency is not contended)
        time = np.where(np.isfinite(line[:, 0]), line[:, 0] + line[:, 1] * s * c, time)
    return np.maximum(np.where(np.isfinite(time), time, 0.0), 0.0), index


def _achieved(lines, terms, rows, index, L, T):
    plugin = 0.0
    if lines.plugin is not None and lines.plugin.any():
        raw, base = lines.plugin[rows, index], lines.intercept[rows, index]
        plugin = np.where(base > 0, raw * L / np.where(base > 0, base, 1.0), 0.0)  # plateau scales it too
    ramp, width = terms.ramp[index], terms.width[index]
    with np.errstate(invalid="ignore", divide="ignore"):
        fill = np.where(ramp > 0, ramp * L * T / np.maximum(T + width * L, 1e-300), 0.0)
    return (terms.latency_factor[index] * (L - plugin) + terms.plugin_factor[index] * plugin
            + T * terms.inv_efficiency[index] + fill)


#: up to this many (plan, size) elements :func:`line_time` evaluates each one directly
_SMALL = 64


def line_time(lines: CollectiveLines, size, *, with_choice: bool = False):
    """Seconds of the collective for ``size`` bytes (shape ``(plans,)`` or ``(plans, k)``).

    The candidate is chosen per element as the module docstring says. With ``with_choice``,
    also returns the index of the chosen column.
    """
    s = np.asarray(size, dtype=float)
    if s.ndim == 0:
        s = np.full(lines.plans, float(s))
    plan_rows = lines.rows_of_plans().reshape((-1,) + (1,) * max(s.ndim - 1, 0))
    same = plan_rows.shape == s.shape
    shape = s.shape if same else np.broadcast_shapes(plan_rows.shape, s.shape)
    if lines.measured is None and not lines.intercept.any() and not lines.slope.any():
        # every candidate costs nothing (a group of one rank): each element is 0, the first
        # column chosen, as the general evaluation gives (every term is a multiple of 0)
        time = np.zeros(shape)
        return (time, np.zeros(shape, dtype=np.intp)) if with_choice else time
    if math.prod(shape) <= _SMALL:  # a few elements: each evaluated, no search for repeats
        rows, sizes = (plan_rows, s) if same else np.broadcast_arrays(plan_rows, s)
        time, index = _evaluate(lines, rows.ravel(), sizes.ravel())
        return (time.reshape(shape), index.reshape(shape)) if with_choice else time.reshape(shape)
    rows_u, rows_inv = np.unique(plan_rows, return_inverse=True)
    sizes_u, sizes_inv = np.unique(s, return_inverse=True)
    if len(rows_u) * len(sizes_u) < math.prod(shape):  # each distinct (geometry, size) once
        time, index = _evaluate(lines, np.repeat(rows_u, len(sizes_u)), np.tile(sizes_u, len(rows_u)))
        at = (rows_inv.reshape(plan_rows.shape) * len(sizes_u) + sizes_inv.reshape(s.shape))
    else:
        rows, sizes = np.broadcast_arrays(plan_rows, s)
        time, index = _evaluate(lines, rows.ravel(), sizes.ravel())
        at = np.arange(time.size).reshape(shape)
    return (time[at], index[at]) if with_choice else time[at]


def take_lines(lines: CollectiveLines, rows) -> CollectiveLines:
    """The lines of some plans (an index array or mask); ``lines`` itself when ``rows`` takes
    every plan in order."""
    r = np.asarray(rows)
    if r.dtype.kind in "iu" and r.size == lines.plans and np.array_equal(r, np.arange(r.size)):
        return lines
    return replace(lines, geometry=lines.rows_of_plans()[r])


def select_lines(mask, a: CollectiveLines, b: CollectiveLines) -> CollectiveLines:
    """Per plan, the lines of ``a`` where ``mask`` holds, else those of ``b``: their tables
    stacked, columns shared when both have the same plain ones, else side by side with the other
    side's columns disabled."""
    m = np.asarray(mask, dtype=bool)
    n_a = a.intercept.shape[0]
    geometry = np.where(m, a.rows_of_plans(), b.rows_of_plans() + n_a)
    if (a.algorithms == b.algorithms and a.terms is None and b.terms is None
            and a.measured is None and b.measured is None):
        contention = None if a.contention is None and b.contention is None else np.vstack(
            [a.full().contention, b.full().contention])
        return replace(a, intercept=np.vstack([a.intercept, b.intercept]),
                       slope=np.vstack([a.slope, b.slope]), geometry=geometry,
                       contention=contention)
    a, b = a.full(), b.full()

    def block(x, y, fill):  # [[x, fill], [fill, y]]; a (rows, columns, 2) table plane by plane
        shape = (x.shape[0] + y.shape[0], x.shape[1] + y.shape[1]) + x.shape[2:]
        out = np.full(shape, fill, dtype=np.result_type(x, y, np.asarray(fill)))
        out[:x.shape[0], :x.shape[1]] = x
        out[x.shape[0]:, x.shape[1]:] = y
        return out

    return CollectiveLines(
        op=a.op, algorithms=a.algorithms + b.algorithms, tolerance=a.tolerance,
        intercept=block(a.intercept, b.intercept, np.inf), slope=block(a.slope, b.slope, 0.0),
        plateau=block(a.plateau, b.plateau, np.inf), plugin=block(a.plugin, b.plugin, 0.0),
        terms=a.terms.join(b.terms), geometry=geometry,
        contention=block(a.contention, b.contention, 1.0),
        measured=block(a.measured, b.measured, np.nan))


def with_contention(lines: CollectiveLines, factor) -> CollectiveLines:
    """``lines`` with each plan's bytes term slowed ``factor`` times: a scalar, an array
    (plans,) or (plans, columns) (a slowdown per candidate's traffic pattern). One table row per
    distinct (row, factors) pair, so plans keep sharing rows."""
    rows = lines.rows_of_plans()
    columns = lines.intercept.shape[1]
    f = np.asarray(factor, dtype=float)
    f = np.broadcast_to(f[:, None] if f.ndim == 1 else f, (rows.size, columns))
    if np.all(f == 1.0):
        return lines
    base = lines.full()
    new = base.contention[rows] * f
    unique, keep, inverse = np.unique(np.column_stack([rows.astype(float), new]), axis=0,
                                      return_index=True, return_inverse=True)
    keep = rows[keep]
    return replace(base, intercept=base.intercept[keep], slope=base.slope[keep],
                   plateau=base.plateau[keep], plugin=base.plugin[keep],
                   measured=base.measured[keep],
                   contention=unique[:, 1:], geometry=inverse.reshape(-1))


def pair_time(lines_a: CollectiveLines, size_a, lines_b: CollectiveLines, size_b):
    """Time of two collectives of per-column sizes, skipping empty ones (a side with no
    positive size is not evaluated at all: its time is 0 everywhere)."""
    return _where_positive(lines_a, size_a) + _where_positive(lines_b, size_b)


def _where_positive(lines: CollectiveLines, size):
    """``line_time(lines, size)`` where ``size > 0``, else 0."""
    positive = np.asarray(size) > 0
    if not positive.any():
        return np.zeros(positive.shape)
    return np.where(positive, line_time(lines, size), 0.0)
