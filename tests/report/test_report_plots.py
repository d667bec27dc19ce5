"""Every figure from hand-made data: titles, labelled axes with units, legends, the shared
colours, PNG + SVG files, and byte-identical output for identical data."""

from __future__ import annotations

import pytest

pytest.importorskip("matplotlib")

from willitscale.estimation.timeline import Span, Timeline  # noqa: E402
from willitscale.report.plots.base import png_bytes, svg_text, write_charts  # noqa: E402
from willitscale.report.style import COLORS  # noqa: E402

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
    from willitscale.report.plots.fabric import (
        link_utilization_histogram,
        traffic_heatmap,
    )
    from willitscale.report.plots.measurements import (
        busbw_vs_size,
        predicted_vs_measured,
    )
    from willitscale.report.plots.memory import memory_bars
    from willitscale.report.plots.planner import top_plans
    from willitscale.report.plots.requirements import bandwidth_requirements
    from willitscale.report.plots.scaling import (
        breakdown_bars,
        comms_vs_compute,
        scaling_efficiency,
    )
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
    from willitscale.report.plots.scaling import comms_vs_compute

    with pytest.raises(ConfigError):  # one node count has no crossover to draw
        comms_vs_compute([4], [0.42], [0.69])


def test_a_pipeline_timeline_shows_its_bubble_in_the_bubble_colour():
    # Megatron-LM's GPT-3 175B layout: 16 stages, 192 micro-batches per step, so the 1F1B bubble
    # is (p-1)/m = 15/192 = 7.8% of the ideal time; the estimate puts half before the first
    # forward (the pipeline filling) and half after the last backward (draining)
    from matplotlib.colors import to_hex

    from willitscale.estimation.estimate import estimate
    from willitscale.report.figures import timeline_chart
    from willitscale.scenario.build import build_scenario

    est = estimate(build_scenario({"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 128,
                                   "gpus_per_node": 8, "inter_node": "8x200Gbps", "tp": 8,
                                   "pp": 16, "dp": 8, "global_batch": 1536, "micro_batch": 1,
                                   "seq_len": 2048, "recompute": "full"}))
    assert est.breakdown.bubble / est.step_time > 0.05
    chart = timeline_chart([("128 nodes", est)])
    ax = chart.figure.axes[0]
    bubble = [c for c in ax.collections
              if to_hex(c.get_facecolor()[0]).upper() == COLORS["bubble"].upper()]
    drawn = sum(w for c in bubble for _, w in _bars(c))
    # the time axis is in seconds here (the step is 28.8 s, time_unit keeps s from 10 s)
    assert drawn == pytest.approx(est.breakdown.bubble, rel=1e-6)
    legend = [t.get_text() for t in chart.figure.legends[0].get_texts()]
    assert "pipeline bubble" in legend
    # 191 micro-batches drawn as one block are forward + backward, not "bwd"
    texts = [t.get_text() for t in ax.texts]
    assert "bwd" not in texts and any("191" in t for t in texts)


def test_the_plot_reads_kinds_and_args_not_span_names():
    # review R3: a collapsed block is labelled from args["micro_batches"], whatever its name; a
    # bubble is a span of kind "bubble", and an idle span is idle even if its name says bubble
    from willitscale.report.plots.timeline import merged_blocks

    spans = [Span(lane="compute", kind="backward", name="earlier work", start=0.0, end=1.0,
                  args={"micro_batches": 5}),
             Span(lane="compute", kind="backward", name="micro-batches 1-9", start=1.0, end=2.0),
             Span(lane="comms", kind="comm", name="TP", start=0.0, end=1.0,
                  args={"micro_batches": 5})]
    texts = [b[3] for b in merged_blocks(spans, gap=0.0)]
    assert texts == ["fwd + bwd × 5", "comms", "bwd"]
    idle = [Span(lane="idle", kind="idle", name="a bubble by name", start=0.0, end=1.0),
            Span(lane="idle", kind="bubble", name="fill", start=1.0, end=2.0)]
    assert [b[2] for b in merged_blocks(idle, gap=0.0)] == ["idle", "bubble"]


def _bars(collection):
    """(x, width) of each bar of a broken_barh collection."""
    out = []
    for path in collection.get_paths():
        xs = path.vertices[:, 0]
        out.append((xs.min(), xs.max() - xs.min()))
    return out


def test_memory_chart_adds_up_to_the_estimates_total_and_marks_the_usable_memory():
    # seeds/000's 2B job, no shape, DDP (docs/memory.md): fp32 weights 4 B + fp32 gradients 4 B
    # + Adam 8 B per parameter, DDP's bucket copy of the gradients 4 B, autocast's 16-bit
    # weight copies 2 B: 22 x 2e9 = 44e9 bytes; cuBLAS workspace 8,519,680 B; CUDA context
    # 0.51 GiB; NCCL 688 MiB (one 32-rank communicator) = 45,277,548,298 bytes = 42.2 GiB,
    # of the whole 80 GiB (--memory-fraction 1); with --memory-fraction 0.9, 72.0 GiB usable
    from willitscale.estimation.estimate import estimate
    from willitscale.report.figures import memory_chart
    from willitscale.scenario.build import build_scenario

    job = {"params": 2e9, "gpu": "a100-80gb", "nodes": 4, "gpus_per_node": 8,
           "inter_node": "200Gbps", "micro_batch": 2, "seq_len": 2048, "hfu": 0.5,
           "recompute": "full"}
    total = 44e9 + 8_519_680 + 0.51 * GIB + 688 * 2**20
    est = estimate(build_scenario(job))
    assert est.memory.total == pytest.approx(total)
    chart = memory_chart([("4 nodes", est)])
    ax = chart.figure.axes[0]
    widths = sum(p.get_width() for p in ax.patches)
    assert widths == pytest.approx(total / GIB)
    assert any("42.2 of 80 GiB" in t.get_text() for t in ax.texts)
    labels = [t.get_text() for t in chart.figure.legends[0].get_texts()]
    assert {"buffers", "workspace", "CUDA context", "NCCL"} <= set(labels)
    assert "activations" not in labels  # unknown: said, not drawn
    tight = memory_chart([("4 nodes", estimate(build_scenario({**job, "memory_fraction": 0.9})))])
    assert any("42.2 of 72.0 GiB usable" in t.get_text() for t in tight.figure.axes[0].texts)


def test_requirements_chart_keeps_every_row_on_the_link_that_limits_it():
    # `requirements --json` rows of a PCIe node: one node is limited inside the node (per GPU,
    # PCIe 4.0 x16 = 31.5 GB/s = 252 Gb/s today), two and four nodes by the NICs (per node, 4 x
    # 200 Gb/s = 800 Gb/s today). Every row must be drawn, each against its own link's rate.
    from willitscale.report.figures import requirements_charts

    def row(nodes, link, now, needed):
        return {"nodes": nodes, "params": 7e9, "link": link, "current_bandwidth_Gbps": now,
                "required_bandwidth_Gbps": needed, "comms_within_backward_Gbps": None}

    rows = [row(1, "intra-node, per GPU", 252.0, 300.0),
            row(2, "inter-node, per node", 800.0, 900.0),
            row(4, "inter-node, per node", 800.0, 1000.0)]
    (chart,) = requirements_charts(rows, share=0.05)
    intra, inter = chart.figure.axes  # the panel of the fewest nodes first
    assert "per GPU" in intra.get_ylabel() and "per node" in inter.get_ylabel()

    def drawn(ax):
        lines = {line.get_label(): line for line in ax.lines}
        needed = lines["needed: 7B parameters"]
        today = next(v for k, v in lines.items() if k.startswith("today"))
        return list(needed.get_xdata()), list(needed.get_ydata()), today.get_ydata()[0]

    assert drawn(intra) == ([1], [300.0], 252.0)
    assert drawn(inter) == ([2, 4], [900.0, 1000.0], 800.0)


def _rendered(chart):
    """The figure drawn once (so extents are final) and its renderer."""
    fig = chart.figure
    fig.canvas.draw()
    return fig, fig.canvas.get_renderer()


def _overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_busbw_of_a_slow_link_is_drawn_in_its_own_unit_with_the_sweeps_sizes():
    from willitscale.report.plots.measurements import busbw_vs_size

    # an emulated 200 Mbit/s link: ~24 MB/s busbw, swept 1 MB .. 16 MB by factors of 2
    sizes = [1e6 * 2**k for k in range(5)]
    chart = busbw_vs_size({"all_reduce, 2 ranks": (sizes, [20e6, 22e6, 23e6, 23.5e6, 24e6])},
                          {"all_reduce": (sizes, [19e6, 22e6, 23e6, 24e6, 24e6])})
    fig, renderer = _rendered(chart)
    ax = fig.axes[0]
    assert ax.get_ylabel() == "bus bandwidth (MB/s)"  # not a 0.000-0.020 GB/s axis
    assert ax.get_ylim()[1] > 24  # the highest point (24 MB/s) is inside, not on the edge
    ticks = [t.get_text() for t in ax.get_xticklabels() if t.get_text()]
    assert ticks == ["1 MB", "2 MB", "4 MB", "8 MB", "16 MB"]  # decimal sweep, decimal ticks
    legend = fig.legends[0].get_window_extent(renderer)
    assert not _overlaps(legend, ax.get_window_extent(renderer))  # never over the data


def test_a_powers_of_two_sweep_keeps_binary_ticks():
    from willitscale.report.plots.measurements import busbw_vs_size

    sizes = [2.0**k for k in range(20, 31)]  # 1 MiB .. 1 GiB
    chart = busbw_vs_size({"all_reduce": (sizes, [100e9] * len(sizes))})
    fig, _ = _rendered(chart)
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels() if t.get_text()]
    assert "1 MiB" in ticks and "1 GiB" in ticks
    assert fig.axes[0].get_ylabel() == "bus bandwidth (GB/s)"


def test_predicted_vs_measured_legend_stays_off_the_points():
    from willitscale.report.plots.measurements import predicted_vs_measured

    chart = predicted_vs_measured([0.1, 0.2, 0.5, 1.0], [0.11, 0.19, 0.55, 2.13],
                                  in_sample=[True, True, False, False])
    fig, renderer = _rendered(chart)
    legend = fig.legends[0].get_window_extent(renderer)
    assert not _overlaps(legend, fig.axes[0].get_window_extent(renderer))
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_text()]
    assert "0.2" in labels and not any("e-" in x for x in labels)


def test_a_one_panel_requirements_legend_fits_in_the_figure():
    from willitscale.report.plots.requirements import bandwidth_requirements

    chart = bandwidth_requirements([4, 8, 16], {"1.56B parameters": [600.0, 610.0, 615.0]},
                                   current=1600.0, share=0.05,
                                   closed_form={"all-reduce within backward, bandwidth-bound "
                                                "(1.56B)": [750.0, 750.0, 750.0]})
    fig, renderer = _rendered(chart)
    legend = fig.legends[0].get_window_extent(renderer)
    whole = fig.get_window_extent(renderer)
    assert whole.x0 <= legend.x0 and legend.x1 <= whole.x1  # was cut off at the right edge


def test_the_heatmaps_colour_bar_says_what_it_measures():
    from willitscale.report.plots.fabric import traffic_heatmap

    chart = traffic_heatmap([[0, 1e9], [2e9, 0]], unit="bytes")
    bars = [ax for ax in chart.figure.axes if ax.get_label() == "<colorbar>"]
    assert bars and "bytes sent" in bars[0].get_ylabel()
