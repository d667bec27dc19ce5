"""``--plot DIR`` on estimate, scale and requirements, and the missing-matplotlib message."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("matplotlib")


def _png_size(path):
    import struct

    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])  # IHDR width, height


def test_scale_plot_writes_pngs_showing_the_crossover(cli, tmp_path, scenario_flags):
    code, out, err = cli("scale", *scenario_flags, "--nodes", "1..16", "--plot", str(tmp_path))
    assert code == 0, err
    assert "Scaling" in out  # the table is still printed
    for name in ("breakdown", "scaling", "comms-vs-compute"):
        assert (tmp_path / f"{name}.png").stat().st_size > 10_000
        assert (tmp_path / f"{name}.svg").exists()
    # 7.5 x 4.2 inches at 150 dpi (report.style): 1125 x 630 pixels
    assert _png_size(tmp_path / "comms-vs-compute.png") == (1125, 630)
    assert "comms-vs-compute" in err


def test_the_crossover_sits_where_the_handbook_puts_it(handbook_estimates):
    # seeds/000: comms 0.027 s < compute 0.42 s on one node, 0.64 s > 0.42 s on four; our
    # all-reduce is 0.061 s and 0.79 s (docs/reproductions.md), so the line is in (1, 4)
    from willitscale.report.figures import scaling_charts

    charts = {c.name: c for c in scaling_charts(handbook_estimates)}
    ax = charts["comms-vs-compute"].figure.axes[0]
    marks = [line.get_xdata()[0] for line in ax.lines if len(set(line.get_xdata())) == 1]
    assert len(marks) == 1 and 1 < marks[0] < 4
    assert "crossover" in charts["comms-vs-compute"].caption or "outlasts" in \
        charts["comms-vs-compute"].caption


def test_estimate_and_requirements_plot(cli, tmp_path, acceptance_flags, scenario_flags):
    code, _, err = cli("estimate", *acceptance_flags, "--plot", str(tmp_path / "e"))
    assert code == 0, err
    assert {p.name for p in (tmp_path / "e").iterdir()} == {
        "timeline.png", "timeline.svg", "memory.png", "memory.svg"}
    code, _, err = cli("requirements", *scenario_flags, "--nodes", "1,2,4", "--plot", str(tmp_path / "r"))
    assert code == 0, err
    assert (tmp_path / "r" / "requirements.png").exists()


def test_without_matplotlib_the_message_says_how_to_install_it(cli, tmp_path, monkeypatch,
                                                              acceptance_flags, scenario_flags):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` raises ImportError
    code, _, err = cli("scale", *scenario_flags, "--nodes", "1,2", "--plot", str(tmp_path))
    assert code != 0
    assert "matplotlib" in err and "pip install 'willitscale[plot]'" in err
    assert "Traceback" not in err
    code, _, err = cli("report", *acceptance_flags, "--html", str(tmp_path / "x.html"))
    assert code != 0 and "willitscale[plot]" in err
    assert not (tmp_path / "x.html").exists()


def test_fabric_simulate_plot(cli, tmp_path):
    code, _, err = cli("fabric", "simulate", "--topology", "rail-optimized", "--nodes", "2",
                       "--gpus-per-node", "4", "--size", "64MB", "--plot", str(tmp_path))
    assert code == 0, err
    for name in ("link-utilization", "traffic-heatmap"):
        assert (tmp_path / f"{name}.png").exists() and (tmp_path / f"{name}.svg").exists()


def test_plot_helpers_for_bench_validate_and_plan_take_plain_records(tmp_path, capsys):
    # hand-made records in the JSON shapes those commands print (their CLI wiring lands later)
    from willitscale.cli.plot_flag import bench_plots, plan_plots, validate_plots

    rows = [{"op": "all_reduce", "ranks": 8, "size_bytes": s, "busbw_GBps": bw, "in_place": ip}
            for s, bw in ((2**20, 5.0), (2**26, 18.0), (2**30, 20.0)) for ip in (False, True)]
    paths = bench_plots(str(tmp_path), rows, {"ring": ([2**20, 2**30], [6e9, 21e9])})
    assert {p.name for p in paths} == {"busbw.png", "busbw.svg"}
    validate_plots(str(tmp_path), [{"measured_s": 0.1, "predicted_s": 0.11, "in_sample": True},
                                   {"measured_s": 1.0, "predicted_s": 0.8, "in_sample": False}])
    assert (tmp_path / "validate.png").exists()
    gib = 2**30
    memory = {"weights_bytes": 4 * gib, "gradients_bytes": 8 * gib, "optimizer_bytes": 24 * gib,
              "activations_bytes": None, "capacity_bytes": 80 * gib}
    plans = [{"label": f"TP{t} DP{32 // t}", "tokens_per_s": 1e5 / t, "fits": True,
              "memory": memory, "breakdown_s": {"forward_s": 0.1, "backward_s": 0.3,
                                                "bubble_s": 0.0, "exposed_comms_s": 0.05 * t}}
             for t in (1, 2, 4)]
    plan_plots(str(tmp_path), plans)
    assert (tmp_path / "plans.png").exists() and (tmp_path / "plans-memory.png").exists()
    assert "plans.{png,svg}" in capsys.readouterr().err


def test_scale_plot_with_one_node_count_draws_no_crossover_and_says_why(cli, tmp_path,
                                                                        scenario_flags):
    # one node count has no scaling curve and no crossover: drawing a one-point "scaling" chart
    # would mislead, so only the breakdown is written and stderr says why
    code, out, err = cli("scale", *scenario_flags, "--nodes", "4", "--plot", str(tmp_path))
    assert code == 0, err
    assert {p.name for p in tmp_path.iterdir()} == {"breakdown.png", "breakdown.svg"}
    assert "only one node count (4)" in err and "crossover" in err


def test_scale_plot_of_a_plan_out_of_memory_still_draws(cli, tmp_path):
    # Llama-2-7B without ZeRO on A100 80GB PCIe needs ~155 GiB per GPU (18 bytes per parameter
    # of training state alone is 121 GB): every row is OOM, the table and the figures still come
    code, out, err = cli("scale", "--model", "llama2-7b", "--gpu", "a100-80gb-pcie",
                         "--gpus-per-node", "4", "--nodes", "1,2", "--seq-len", "2048",
                         "--micro-batch", "2", "--plot", str(tmp_path))
    assert code == 0, err
    assert "OOM" in out and (tmp_path / "comms-vs-compute.png").exists()
