"""A calibration's measured ``[[collective]]`` entries time the estimate's collectives
(willitscale.collectives.measured_lines): planted lines must show up exactly."""

import json

import numpy as np
import pytest

from willitscale.collectives.lines import cluster_links, collective_lines, line_time
from willitscale.scenario.build import build_scenario
from willitscale.topology.placement import group_placement

MIB = 2**20
FLAGS = ["estimate", "--params", "1e9", "--gpu", "a100-80gb", "--nodes", "2", "--gpus-per-node", "1",
         "--micro-batch", "4", "--seq-len", "1024", "--json", "--no-overlap"]


def _entry(algorithm, protocol, *, latency_us, algbw_GBps, nodes=2, rpn=1, backend="nccl",
           op="all_reduce", sizes=(MIB, 2**30)):
    return (f'[[collective]]\nbackend = "{backend}"\nop = "{op}"\nalgorithm = "{algorithm}"\n'
            f'protocol = "{protocol}"\nnodes = {nodes}\nranks_per_node = {rpn}\n'
            f"latency_us = {latency_us}\nalgbw_GBps = {algbw_GBps}\n"
            f"min_size_bytes = {sizes[0]}\nmax_size_bytes = {sizes[1]}\nruns = [7]\n")


def _write(tmp_path, *entries, links=""):
    path = tmp_path / "cal.toml"
    path.write_text("format = 2\n" + links + "".join(entries))
    return str(path)


def _every_ring_tree_pair(**kw):
    return [_entry(a, p, **kw) for a in ("Ring", "Tree") for p in ("LL", "LL128", "Simple")]


def test_a_planted_curve_is_the_estimates_gradient_all_reduce_time(cli, tmp_path):
    # 2 nodes x 1 A100: NCCL may pick Ring or Tree with any protocol per bucket; plant the same
    # line for all six, 100 us + S / 5 GB/s, so whichever it picks the bucket takes that line.
    path = _write(tmp_path, *_every_ring_tree_pair(latency_us=100.0, algbw_GBps=5.0))
    code, out, err = cli(*FLAGS, "--calibration", path)
    assert code == 0, err
    d = json.loads(out)
    (op,) = d["comm_ops"]
    # 1e9 fp32 gradients = 4e9 B in DDP's buckets: 1 MiB first, then 25 MiB:
    # 1 + ceil((4e9 - 2^20) / (25 x 2^20)) = 1 + ceil(152.55) = 154 all-reduces
    assert op["calls"] == 154 and op["size_bytes"] == pytest.approx(4e9)
    assert op["algorithm"].startswith("NCCL Ring/Simple (measured)")  # a 26 MB mean bucket
    # no overlap: comms = 154 x 100 us + 4e9 B / 5e9 B/s = 0.0154 + 0.8 = 0.8154 s
    assert d["comms_s"] == pytest.approx(154 * 100e-6 + 4e9 / 5e9, rel=1e-9)
    notes = [a["value"] for a in d["assumptions"] if a["what"] == "measured collective"]
    assert len(notes) == 6 and "extrapolated along that line" in notes[0] and "1.00 MiB" in notes[0]


def test_an_entry_of_another_geometry_changes_nothing(cli, tmp_path):
    code, out, _ = cli(*FLAGS)
    assert code == 0
    plain = json.loads(out)["comms_s"]
    path = _write(tmp_path, *_every_ring_tree_pair(latency_us=100.0, algbw_GBps=5.0, nodes=4))
    code, out, _ = cli(*FLAGS, "--calibration", path)
    assert code == 0
    assert json.loads(out)["comms_s"] == plain  # 4 nodes measured, the group spans 2


def _lines(path, collectives="nccl"):
    scenario = build_scenario({"params": 1e9, "gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 1,
                               "seq_len": 1024, "collectives": collectives,
                               **({"calibration": path} if path else {})})
    links = cluster_links(scenario)
    dp = group_placement("dp", {"tp": 1, "cp": 1, "ep": 1, "dp": 2, "pp": 1}, 1)
    return collective_lines("all_reduce", dp, links)


def test_nccl_keeps_its_pick_and_times_only_the_measured_pair(tmp_path):
    path = _write(tmp_path, _entry("Ring", "Simple", latency_us=100.0, algbw_GBps=5.0))
    model, measured = _lines(None), _lines(path)
    sizes = np.array([1024.0, 2.0**30])
    t0, pick0 = line_time(model, sizes, with_choice=True)
    t1, pick1 = line_time(measured, sizes, with_choice=True)
    names = [model.algorithms[i] for i in np.ravel(pick0)]
    assert names[1] == "Ring/Simple" and names[0] != "Ring/Simple"  # NCCL's model's picks
    assert np.array_equal(pick0, pick1)  # a measurement does not change what NCCL runs
    t0, t1 = np.ravel(t0), np.ravel(t1)
    assert t1[0] == t0[0]  # 1 KiB: an unmeasured pair, the model's time
    # 1 GiB on the measured Ring/Simple: 100 us + 2^30 / 5e9 = 0.21485 s (model: ~0.05 s)
    assert t1[1] == pytest.approx(100e-6 + 2**30 / 5e9, rel=1e-12)
    assert t0[1] < 0.1


def test_alpha_beta_takes_the_fastest_measured_pair(tmp_path):
    link = ('[[link]]\nlevel = "inter_node"\nbandwidth_GBps = 20.0\nlatency_us = 5\n'
            'backend = "nccl"\nranks_per_node = 1\n')
    path = _write(tmp_path, _entry("Ring", "Simple", latency_us=100.0, algbw_GBps=5.0),
                  _entry("Tree", "LL", latency_us=5.0, algbw_GBps=0.5), links=link)
    lines = _lines(path)
    t = np.ravel(line_time(lines, np.array([1024.0, 2.0**30])))
    # 1 KiB: Tree/LL 5 us + 1024 / 0.5e9 = 7.048 us beats Ring/Simple's 100.2 us
    assert t[0] == pytest.approx(5e-6 + 1024 / 0.5e9, rel=1e-12)
    # 1 GiB: Ring/Simple 100 us + 2^30 / 5e9 = 0.2148 s beats Tree/LL's 2.147 s
    assert t[1] == pytest.approx(100e-6 + 2**30 / 5e9, rel=1e-12)


def test_gloo_times_the_group_by_its_measured_ring(tmp_path):
    entry = _entry("ring", "", latency_us=800.0, algbw_GBps=0.02, backend="gloo")
    path = _write(tmp_path, entry)
    t = np.ravel(line_time(_lines(path, "gloo"), np.array([4e6])))
    # 800 us + 4e6 B / 0.02e9 B/s = 0.2008 s (the measured line already holds any host staging)
    assert t[0] == pytest.approx(800e-6 + 4e6 / 0.02e9, rel=1e-12)


PLAN = ["plan", "--params", "1e9", "--gpu", "a100-80gb", "--nodes", "2", "--gpus-per-node", "1",
        "--seq-len", "1024", "--global-batch", "8", "--zero", "0", "--json"]


def test_the_planner_times_plans_by_the_measured_curve_as_the_estimate_does(cli, tmp_path):
    import shlex

    path = _write(tmp_path, *_every_ring_tree_pair(latency_us=100.0, algbw_GBps=5.0))
    code, out, err = cli(*PLAN)
    assert code == 0, err
    plain = json.loads(out)["plans"][0]
    code, out, err = cli(*PLAN, "--calibration", path)
    assert code == 0, err
    best = json.loads(out)["plans"][0]
    # 4e9 B of gradients at 5 GB/s alone take 0.8 s, far above the catalog link's time
    assert best["step_time_s"] > plain["step_time_s"] + 0.5
    code, out, err = cli("estimate", "--params", "1e9", "--gpu", "a100-80gb", "--nodes", "2",
                         "--gpus-per-node", "1", "--seq-len", "1024", *shlex.split(best["flags"]),
                         "--calibration", path, "--json")
    assert code == 0, err
    assert json.loads(out)["step_time_s"] == pytest.approx(best["step_time_s"], rel=1e-9)


def test_a_what_if_faster_nic_speeds_up_the_measured_bytes_term(tmp_path):
    from dataclasses import replace

    path = _write(tmp_path, *_every_ring_tree_pair(latency_us=100.0, algbw_GBps=5.0))
    scenario = build_scenario({"params": 1e9, "gpu": "a100-80gb", "nodes": 2, "gpus_per_node": 1,
                               "seq_len": 1024, "calibration": path})
    links = cluster_links(scenario)
    # the levers' what-if: each node's NICs twice as fast (line rate and bandwidth alike)
    faster = replace(links, inter_bandwidth=2 * links.inter_bandwidth,
                     inter_line_rate=2 * links.inter_line_rate)
    dp = group_placement("dp", {"tp": 1, "cp": 1, "ep": 1, "dp": 2, "pp": 1}, 1)
    t = np.ravel(line_time(collective_lines("all_reduce", dp, faster), np.array([2.0**30])))
    # the group crosses the NICs: 100 us + 2^30 B / (2 x 5 GB/s) = 0.10747 s (latency unchanged)
    assert t[0] == pytest.approx(100e-6 + 2**30 / 10e9, rel=1e-12)


def test_nccl_names_are_read_as_nccl_spells_them_and_an_unknown_one_is_an_error(tmp_path):
    from willitscale.errors import ConfigError

    # "ring"/"simple" is NCCL_ALGO=ring NCCL_PROTO=simple: the same pair as Ring/Simple
    path = _write(tmp_path, _entry("ring", "Simple", latency_us=100.0, algbw_GBps=5.0))
    t = np.ravel(line_time(_lines(path), np.array([2.0**30])))
    assert t[0] == pytest.approx(100e-6 + 2**30 / 5e9, rel=1e-12)
    bad = _write(tmp_path, _entry("Hypercube", "Simple", latency_us=100.0, algbw_GBps=5.0))
    with pytest.raises(ConfigError, match="Hypercube"):
        _lines(bad)


def test_measured_lines_survive_select_lines(tmp_path):
    from willitscale.collectives.line_time import select_lines

    path = _write(tmp_path, *_every_ring_tree_pair(latency_us=100.0, algbw_GBps=5.0))
    measured, model = _lines(path), _lines(None)
    both = select_lines(np.array([True, False]), measured, model)
    size = np.array([[2.0**30], [2.0**30]])
    t = line_time(both, size)[:, 0]
    # plan 0 takes the measured line, plan 1 the model's own time at 1 GiB
    assert t[0] == pytest.approx(100e-6 + 2**30 / 5e9, rel=1e-12)
    assert t[1] == pytest.approx(line_time(model, np.array([2.0**30]))[0], rel=1e-12)
