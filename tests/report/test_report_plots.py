"""Every figure from hand-made data: titles, labelled axes with units, legends, the shared
colours, PNG + SVG files, and byte-identical output for identical data."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from willitscale.report.plots.base import png_bytes, svg_text, write_charts  # noqa: E402
from willitscale.report.style import COLORS  # noqa: E402
from willitscale.report.timeline import Span, Timeline  # noqa: E402

GIB = 2**30


def _step(exposed: float) -> Timeline:
    """fwd 0.1 s, bwd 0.3 s, all-reduce from 0.1 s for 0.3 + exposed s, then optimizer 0.02 s."""
    end_comm = 0.4 + exposed
    spans = [Span(lane="compute", kind="forward", name="f", start=0.0, end=0.1),
             Span(lane="compute", kind="backward", name="b", start=0.1, end=0.4),
             Span(lane="comms", kind="comm", name="ar", start=0.1, end=end_comm)]
    if exposed:
        spans.append(Span(lane="idle", kind="idle", name="wait", start=0.4, end=end_comm))
    spans.append(Span(lane="compute", kind="optimizer", name="o", start=end_comm,
                      end=end_comm + 0.02))
    return Timeline(spans=spans, step_time=end_comm + 0.02)


def _charts():
    from willitscale.report.plots.fabric import link_utilization_histogram, traffic_heatmap
    from willitscale.report.plots.measurements import busbw_vs_size, predicted_vs_measured
    from willitscale.report.plots.memory import memory_bars
    from willitscale.report.plots.planner import top_plans
    from willitscale.report.plots.requirements import bandwidth_requirements
    from willitscale.report.plots.scaling import breakdown_bars, comms_vs_compute, scaling_efficiency
    from willitscale.report.plots.timeline import step_timeline

    sizes = [2**k for k in range(10, 31, 4)]
    matrix = [[0.0 if i == j else (1e9 if i // 4 == j // 4 else 0.0) for j in range(8)]
              for i in range(8)]
    return [
        step_timeline([("1 node", _step(0.0)), ("4 nodes", _step(0.45))]),
        breakdown_bars(["1", "2", "4"], {"forward": [0.1] * 3, "backward": [0.3] * 3,
                                         "exposed_comms": [0.0, 0.1, 0.45]}),
        scaling_efficiency([8, 16, 32], [100.0, 180.0, 200.0]),
        comms_vs_compute([1, 2, 4], [0.42] * 3, [0.05, 0.2, 0.62]),
        memory_bars(["a", "b"], {"weights": [4 * GIB, 2 * GIB], "gradients": [8 * GIB, 4 * GIB],
                                 "optimizer_states": [70 * GIB, 30 * GIB],
                                 "activations": [None, 5 * GIB]}, 80 * GIB),
        bandwidth_requirements([2, 4, 8], {"2B": [240.0, 475.0, None]}, current=200.0),
        top_plans(["TP2 DP16", "DP32"], {"forward": [0.1, 0.1], "bubble": [0.05, 0.0],
                                         "exposed_comms": [0.05, 0.47]}, [1.8e5, 1.3e5],
                  fits=[True, False]),
        busbw_vs_size({"all_reduce": (sizes, [s / (s / 20e9 + 2e-5) for s in sizes])},
                      {"ring": (sizes, [s / (s / 21e9 + 2e-5) for s in sizes])}),
        predicted_vs_measured([0.01, 0.1, 1.0], [0.011, 0.09, 1.3], in_sample=[True, False, False]),
        link_utilization_histogram([(0.0, 0.5, 10), (0.5, 1.0, 6)]),
        traffic_heatmap(matrix, gpus_per_node=4),
    ]


@pytest.fixture(scope="module")
def charts():
    return _charts()


def test_every_figure_has_a_title_labelled_axes_and_a_legend(charts):
    names = [c.name for c in charts]
    assert len(set(names)) == len(names)
    for chart in charts:
        fig = chart.figure
        texts = [t.get_text() for t in fig.texts] + [fig._suptitle.get_text() if fig._suptitle else ""]
        axes = [ax for ax in fig.axes if ax.get_label() != "<colorbar>"]
        titles = texts + [ax.get_title(loc="left") for ax in axes]
        assert any(titles), f"{chart.name}: no title"
        for ax in axes:
            # a unit in every quantitative axis label: "(ms)", "(GiB)", "(Gb/s)", "(%)", ...
            for label in (ax.get_xlabel(), ax.get_ylabel()):
                if label and label not in ("nodes", "GPUs", "source GPU", "destination GPU",
                                              "fabric links"):  # counts
                    assert "(" in label and ")" in label, f"{chart.name}: {label!r} has no unit"
            assert ax.get_xlabel(), f"{chart.name}: x axis unlabelled"
        has_legend = fig.legends or any(ax.get_legend() for ax in axes)
        is_heatmap_or_histogram = chart.name in ("traffic-heatmap", "link-utilization")
        assert has_legend or is_heatmap_or_histogram, f"{chart.name}: no legend"


def test_timeline_draws_each_kind_in_its_colour(charts):
    from matplotlib.colors import to_hex

    timeline = charts[0].figure.axes[0]
    faces = {to_hex(c.get_facecolor()[0]).upper() for c in timeline.collections}
    for meaning in ("forward", "backward", "communication", "idle", "optimizer"):
        assert COLORS[meaning].upper() in faces, meaning


def test_comms_vs_compute_marks_the_crossover(charts):
    # the hand data of test_chartdata: crossover at 2 ** (1 + 0.22/0.42) = 2.875 nodes
    ax = charts[3].figure.axes[0]
    xs = [line.get_xdata()[0] for line in ax.lines if len(set(line.get_xdata())) == 1]
    assert xs and xs[0] == pytest.approx(2 ** (1 + 0.22 / 0.42))
    assert any("crossover" in t.get_text() for t in ax.texts)


def test_files_are_png_and_svg_and_identical_for_identical_data(tmp_path, charts):
    paths = write_charts(charts[:2], tmp_path)
    assert sorted(p.name for p in paths) == ["breakdown.png", "breakdown.svg", "timeline.png",
                                             "timeline.svg"]
    png = (tmp_path / "timeline.png").read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "timeline.svg").read_text().lstrip().startswith("<?xml")
    again = _charts()[0].figure
    assert png_bytes(again) == png
    assert svg_text(again) == (tmp_path / "timeline.svg").read_text()


def test_plot_inputs_are_checked():
    from willitscale.errors import ConfigError
    from willitscale.report.plots.fabric import traffic_heatmap
    from willitscale.report.plots.measurements import predicted_vs_measured
    from willitscale.report.plots.timeline import step_timeline

    with pytest.raises(ConfigError):
        traffic_heatmap([[1.0, 2.0]])  # not square
    with pytest.raises(ConfigError):
        predicted_vs_measured([1.0], [1.0, 2.0])
    with pytest.raises(ConfigError):
        step_timeline([])
