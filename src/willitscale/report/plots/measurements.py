"""Measurements against the model: nccl-tests-style busbw vs message size, and predicted vs
measured with an error band."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.errors import ConfigError
from willitscale.report.plots.base import Chart, format_bytes_tick, new_figure, styled
from willitscale.report.style import COLORS

__all__ = ["busbw_vs_size", "predicted_vs_measured"]

_MARKERS = "os^Dv<>ph"
_DASHES = ("-", "--", "-.", ":")


@styled
def busbw_vs_size(measured: Mapping[str, tuple[Sequence[float], Sequence[float]]],
                  predicted: Mapping[str, tuple[Sequence[float], Sequence[float]]] | None = None,
                  *, title: str = "Bus bandwidth vs message size",
                  name: str = "busbw") -> Chart:
    """``{label: (sizes in bytes, busbw in bytes/s)}`` measured (dots) and predicted (lines)
    on one chart; x is log2 message size as nccl-tests sweeps it, y GB/s (1e9 bytes/s)."""
    fig, ax = new_figure()
    for k, (label, (sizes, bw)) in enumerate((predicted or {}).items()):
        ax.plot(sizes, [b / 1e9 for b in bw], color=COLORS["predicted"],
                linestyle=_DASHES[k % len(_DASHES)], linewidth=1.8, label=f"predicted: {label}")
    for k, (label, (sizes, bw)) in enumerate(measured.items()):
        ax.plot(sizes, [b / 1e9 for b in bw], color=COLORS["measured"], linestyle="none",
                marker=_MARKERS[k % len(_MARKERS)], markersize=5,
                markerfacecolor="none" if k % 2 else COLORS["measured"],
                label=f"measured: {label}")
    from matplotlib.ticker import FuncFormatter, LogLocator

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(LogLocator(base=2, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(format_bytes_tick))
    ax.set_ylim(bottom=0)
    ax.set_xlabel("message size (bytes per rank, nccl-tests convention)")
    ax.set_ylabel("bus bandwidth (GB/s)")
    ax.set_title(title, loc="left")
    ax.legend(loc="upper left")
    return Chart(name=name, title=title, figure=fig,
                 caption="busbw = algbw x the op's factor (all-reduce 2(n-1)/n), as nccl-tests "
                         "reports it; GB = 1e9 bytes.")


@styled
def predicted_vs_measured(measured: Sequence[float], predicted: Sequence[float], *,
                          in_sample: Sequence[bool] | None = None, band: float = 0.10,
                          unit: str = "s", title: str = "Predicted vs measured",
                          name: str = "validate") -> Chart:
    """Log-log scatter with the ``y = x`` line and a ``±band`` relative-error band; hollow
    markers for in-sample rows (the calibration was fitted to them)."""
    if len(measured) != len(predicted) or not measured:
        raise ConfigError("predicted_vs_measured: measured and predicted must be non-empty and "
                          "of the same length")
    inside = list(in_sample) if in_sample is not None else [False] * len(measured)
    lo = min(min(measured), min(predicted)) / 1.5
    hi = max(max(measured), max(predicted)) * 1.5
    fig, ax = new_figure(figsize=(6.2, 5.4))
    xs = [lo, hi]
    ax.fill_between(xs, [x * (1 - band) for x in xs], [x * (1 + band) for x in xs],
                    color=COLORS["ideal"], alpha=0.18, linewidth=0, label=f"±{band:.0%}")
    ax.plot(xs, xs, color=COLORS["ideal"], linestyle="--", label="predicted = measured")
    for flag, face, label in ((False, COLORS["predicted"], "out-of-sample"),
                              (True, "none", "in-sample (fitted)")):
        pts = [(m, p) for m, p, f in zip(measured, predicted, inside) if f == flag]
        if pts:
            ax.plot(*zip(*pts), linestyle="none", marker="o", markersize=6,
                    markerfacecolor=face, markeredgecolor=COLORS["predicted"], label=label)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel(f"measured ({unit})")
    ax.set_ylabel(f"predicted ({unit})")
    errors = [abs(p - m) / m for m, p, f in zip(measured, predicted, inside) if not f]
    worst = f"; worst out-of-sample error {max(errors):.0%}" if errors else ""
    ax.set_title(title, loc="left")
    ax.legend(loc="upper left")
    return Chart(name=name, title=title, figure=fig,
                 caption=f"{len(measured)} rows{worst}; error = (predicted - measured) / "
                         "measured; the band is the relative error shown.")
