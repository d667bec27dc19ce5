"""Measurements against the model: nccl-tests-style busbw vs message size, and predicted vs
measured with an error band."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from willitscale.errors import ConfigError
from willitscale.report.plots.base import (
    Chart,
    decimal_sizes,
    format_bytes_tick,
    format_decimal_bytes_tick,
    legend_below,
    new_figure,
    rate_unit,
    styled,
)
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
    on one chart; x is log2 message size as nccl-tests sweeps it, ticked at the swept sizes in
    their own convention (1 MB, 2 MB, ... for a decimal sweep; 1 MiB, ... for powers of two);
    y in the decimal unit that fits the largest value (GB/s, MB/s, ...)."""
    series = {**{f"predicted: {k}": v for k, v in (predicted or {}).items()},
              **{f"measured: {k}": v for k, v in measured.items()}}
    sizes_all = sorted({float(s) for sizes, _ in series.values() for s in sizes})
    top = max((float(b) for _, bw in series.values() for b in bw), default=1.0)
    scale, unit = rate_unit(top)
    fig, ax = new_figure()
    for k, (label, (sizes, bw)) in enumerate((predicted or {}).items()):
        ax.plot(sizes, [b / scale for b in bw], color=COLORS["predicted"],
                linestyle=_DASHES[k % len(_DASHES)], linewidth=1.8, label=f"predicted: {label}")
    for k, (label, (sizes, bw)) in enumerate(measured.items()):
        ax.plot(sizes, [b / scale for b in bw], color=COLORS["measured"], linestyle="none",
                marker=_MARKERS[k % len(_MARKERS)], markersize=5, clip_on=False,
                markerfacecolor="none" if k % 2 else COLORS["measured"],
                label=f"measured: {label}")
    from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullLocator

    ax.set_xscale("log", base=2)
    decimal = decimal_sizes(sizes_all)
    if decimal and len(sizes_all) <= 16:
        ax.xaxis.set_major_locator(FixedLocator(sizes_all))
        ax.xaxis.set_minor_locator(NullLocator())
    else:
        ax.xaxis.set_major_locator(LogLocator(base=2, numticks=12))
    ax.xaxis.set_major_formatter(FuncFormatter(format_decimal_bytes_tick if decimal
                                               else format_bytes_tick))
    ax.set_ylim(0, top / scale * 1.08)  # room above the highest point: markers are not cut
    ax.set_xlabel("message size (bytes per rank, nccl-tests convention)")
    ax.set_ylabel(f"bus bandwidth ({unit})")
    ax.set_title(title, loc="left")
    legend_below(fig, *ax.get_legend_handles_labels(), width=fig.get_figwidth())
    return Chart(name=name, title=title, figure=fig,
                 caption="busbw = algbw x the op's factor (all-reduce 2(n-1)/n), as nccl-tests "
                         f"reports it; {unit} in decimal units (GB = 1e9 bytes).")


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
            ax.plot(*zip(*pts), linestyle="none", marker="o", markersize=6, clip_on=False,
                    markerfacecolor=face, markeredgecolor=COLORS["predicted"], label=label)
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    ax.set_xscale("log")
    ax.set_yscale("log")
    plain = FuncFormatter(lambda v, _: f"{v:g}")  # 0.2, 1, 5: not 2e-01
    for axis in (ax.xaxis, ax.yaxis):  # labels at 1, 2 and 5 of each decade, no more
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(NullFormatter())
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    ax.set_xlabel(f"measured ({unit})")
    ax.set_ylabel(f"predicted ({unit})")
    errors = [abs(p - m) / m for m, p, f in zip(measured, predicted, inside) if not f]
    worst = f"; worst out-of-sample error {max(errors):.0%}" if errors else ""
    ax.set_title(title, loc="left")
    legend_below(fig, *ax.get_legend_handles_labels(), width=fig.get_figwidth())
    return Chart(name=name, title=title, figure=fig,
                 caption=f"{len(measured)} rows{worst}; error = (predicted - measured) / "
                         "measured; the band is the relative error shown.")
