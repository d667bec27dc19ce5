"""Loading matplotlib, the :class:`Chart` record, and saving charts deterministically."""

from __future__ import annotations

import io
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from willitscale.errors import ConfigError, MissingDependency
from willitscale.report.style import FIGSIZE, rc_params

__all__ = ["Chart", "require_matplotlib", "new_figure", "styled", "write_charts", "svg_text",
           "png_bytes", "FORMATS", "time_unit", "rate_unit", "format_bytes_tick",
           "format_decimal_bytes_tick", "decimal_sizes", "legend_below"]

FORMATS = ("png", "svg")


def require_matplotlib():
    """The ``matplotlib`` module, or a clear :class:`MissingDependency` error."""
    try:
        import matplotlib
    except ImportError as exc:  # pragma: no cover - the test environment has matplotlib
        raise MissingDependency("matplotlib", "plot", "Plotting (--plot, report)") from exc
    return matplotlib


def styled(build: Callable[..., Any]) -> Callable[..., Any]:
    """Run a figure builder under the shared style (fonts, sizes, colours of the axes)."""
    import functools

    @functools.wraps(build)
    def wrapper(*args, **kwargs):
        mpl = require_matplotlib()
        with mpl.rc_context(rc_params()):
            return build(*args, **kwargs)

    return wrapper


def new_figure(*, figsize: tuple[float, float] = FIGSIZE, nrows: int = 1, ncols: int = 1,
               **kwargs):
    """``(figure, axes)`` without pyplot: an Agg canvas, no GUI, no global figure list."""
    require_matplotlib()
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(nrows=nrows, ncols=ncols, squeeze=True, **kwargs)
    return fig, axes


@dataclass(frozen=True, slots=True, kw_only=True)
class Chart:
    """One figure with the file name it is saved under and what it shows."""

    name: str  #: file stem, e.g. "timeline" -> timeline.png, timeline.svg
    title: str  #: what it shows (the HTML report's caption and alt text)
    figure: Any  #: a matplotlib Figure
    caption: str = ""  #: how to read it

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in "/\\ ."):
            raise ConfigError("chart name", self.name, "a file stem without '/', '.' or spaces")


def _save(fig, target, fmt: str) -> None:
    mpl = require_matplotlib()
    metadata = ({"Date": None, "Creator": "willitscale"} if fmt == "svg"
                else {"Software": "willitscale"})
    with mpl.rc_context(rc_params()):
        fig.savefig(target, format=fmt, metadata=metadata)


def svg_text(fig) -> str:
    """The figure as an SVG document (text drawn as paths: no fonts needed to view it)."""
    buf = io.StringIO()
    _save(fig, buf, "svg")
    return buf.getvalue()


def png_bytes(fig) -> bytes:
    buf = io.BytesIO()
    _save(fig, buf, "png")
    return buf.getvalue()


def write_charts(charts: Iterable[Chart], directory: str | Path,
                 formats: Sequence[str] = FORMATS) -> list[Path]:
    """Save every chart as ``DIR/<name>.<format>``; returns the paths written."""
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ConfigError("figure format", bad[0], "one of " + ", ".join(FORMATS))
    directory = Path(directory)
    try:
        directory.mkdir(exist_ok=True)  # DIR itself, never a missing parent chain
    except OSError as exc:
        raise ConfigError("--plot", str(directory), f"a directory that can be created ({exc})") from exc
    paths = []
    for chart in charts:
        for fmt in formats:
            path = directory / f"{chart.name}.{fmt}"
            _save(chart.figure, path, fmt)
            paths.append(path)
    return paths


def time_unit(seconds: float) -> tuple[float, str]:
    """``(divisor, label)`` for an axis of times up to ``seconds``: ms below 10 s, else s."""
    if seconds < 1e-2:
        return 1e-6, "µs"
    if seconds < 10:
        return 1e-3, "ms"
    return 1.0, "s"


def rate_unit(bytes_per_s: float) -> tuple[float, str]:
    """``(divisor, label)`` for an axis of bandwidths up to ``bytes_per_s``, decimal as
    nccl-tests (GB = 1e9): a 24 MB/s emulated link is drawn in MB/s, not as 0.024 GB/s."""
    for scale, label in ((1e12, "TB/s"), (1e9, "GB/s"), (1e6, "MB/s"), (1e3, "kB/s")):
        if bytes_per_s >= scale:
            return scale, label
    return 1.0, "B/s"


def decimal_sizes(sizes) -> bool:
    """Sizes swept in decimal units (1 MB, 2 MB, ...: not all powers of two): tick them so."""
    return any(s > 0 and (s & (s - 1)) for s in (int(round(x)) for x in sizes))


def format_decimal_bytes_tick(value: float, _pos=None) -> str:
    """Message sizes in decimal units, as the sweep's flags gave them: 1 MB, 250 kB, 1 GB."""
    for scale, suffix in ((1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if value >= scale:
            return f"{value / scale:g} {suffix}"
    return f"{value:g} B"


def legend_below(fig, handles, labels, *, width: float) -> None:
    """One legend under the axes (never over the data), in as many columns as fit ``width``
    inches: a long label drops to fewer columns instead of being cut off at the edge."""
    widest = max((len(label) for label in labels), default=0) * 0.075 + 0.7  # inches per entry
    ncol = max(1, min(len(labels), 3, int(width * 0.95 // widest)))
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol)


def format_bytes_tick(value: float, _pos=None) -> str:
    """Message sizes as nccl-tests prints them in powers of two: 8 B, 1 KiB, 64 MiB, 1 GiB."""
    for scale, suffix in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
        if value >= scale:
            return f"{value / scale:g} {suffix}"
    return f"{value:g} B"
