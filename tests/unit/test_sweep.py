"""willitscale sweep: grid files, their errors, resuming, workers, Parquet and the optional extras."""

from __future__ import annotations

import csv
import sys

import pytest

from willitscale.errors import ConfigError, MissingDependency
from willitscale.sweep.grid import load_grid, parse_grid, parse_seeds
from willitscale.sweep.output import open_rows
from willitscale.sweep.runner import columns_of, run_sweep

#: a small fabric grid: 2 x 2 settings x 2 seeds = 8 points, each a 16-GPU fat-tree (k = 4)
SMALL = {
    "kind": "fabric", "seeds": "1-2",
    "fixed": {"topology": "fat-tree", "k": 4, "gpus_per_node": 4, "collective": "all_reduce", "size": "8MB"},
    "grid": {"oversubscription": [1, 2], "routing": ["ecmp", "spray"]},
}


def _message(data) -> str:
    with pytest.raises(ConfigError) as exc:
        parse_grid(data)
    return str(exc.value)


# ------------------------------------------------------------------ the grid file
def test_grid_is_every_combination_times_every_seed():
    grid = parse_grid(SMALL)
    combos = {(p.settings["oversubscription"], p.settings["routing"], p.seed) for p in grid.points}
    # 2 oversubscriptions x 2 routings x 2 seeds, each once
    assert combos == {(o, r, s) for o in (1, 2) for r in ("ecmp", "spray") for s in (1, 2)}
    assert len(grid.points) == 8 and len({p.key for p in grid.points}) == 8
    assert all(p.settings["k"] == 4 for p in grid.points)  # [fixed] reaches every point
    assert columns_of(grid)[:2] == ("point", "seed")


def test_listed_points_combine_with_the_grid_and_override_fixed():
    data = {**SMALL, "points": [{"k": 4}, {"k": 8, "gpus_per_node": 8}]}
    grid = parse_grid(data)
    assert len(grid.points) == 2 * 8  # each listed point x every grid combination x seeds
    assert {p.settings["gpus_per_node"] for p in grid.points if p.settings["k"] == 8} == {8}


def test_seeds_flag_overrides_the_file():
    assert {p.seed for p in parse_grid(SMALL, seeds=(7,)).points} == {7}
    assert parse_seeds("1-3,9") == (1, 2, 3, 9)
    assert parse_seeds([4, 2]) == (4, 2)


@pytest.mark.parametrize("data, where, value", [
    ({**SMALL, "grid": {"routing": ["ecmp", "spry"]}}, "grid.routing[1]", "'spry'"),
    ({**SMALL, "fixed": {**SMALL["fixed"], "k": "four"}}, "fixed.k", "'four'"),
    ({**SMALL, "fixed": {**SMALL["fixed"], "size": "8"}}, "fixed.size", "'8'"),
    ({**SMALL, "grid": {"oversubscription": [1, -2]}}, "grid.oversubscription[1]", "-2"),
    ({**SMALL, "grid": {"oversubscription": 2}}, "grid.oversubscription", "2"),
    ({**SMALL, "grid": {"oversubscription": []}}, "grid.oversubscription", "[]"),
    ({**SMALL, "points": [{"nodez": 4}]}, "points[0].nodez", "4"),
    ({**SMALL, "seeds": "5-1"}, "seeds", "'5-1'"),
    ({**SMALL, "kind": "fabrik"}, "kind", "'fabrik'"),
    ({**SMALL, "griid": {}}, "griid", "{}"),
    ({"kind": "estimate", "grid": {"tp": [1, "two"]}}, "grid.tp[1]", "'two'"),
    ({"kind": "estimate", "fixed": {"modle": "gpt2"}}, "fixed.modle", "'gpt2'"),
    ({"kind": "estimate", "seeds": "1-3", "fixed": {"model": "gpt2"}}, "seeds", "'1,2,3'"),
])
def test_grid_errors_name_the_field_and_the_value(data, where, value):
    message = _message(data)
    assert f"{where} = {value}" in message, message


def test_unknown_setting_suggests_the_closest():
    assert "did you mean nodes" in _message({**SMALL, "points": [{"nodez": 4}]})


def test_grid_file_errors_name_the_file(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text('kind = "fabric"\n[grid]\nrouting = ["ecmp", "spry"]\n')
    with pytest.raises(ConfigError, match=r"grid\.toml: grid\.routing\[1\] = 'spry'"):
        load_grid(path)


# ------------------------------------------------------------------ running, resuming
def _rows(path) -> list[list[str]]:
    with open(path, newline="") as f:
        return list(csv.reader(f))


def _run(path, grid, **kw):
    return run_sweep(grid, open_rows(path, columns_of(grid)), **kw)


def test_point_that_cannot_run_is_a_finished_row_with_its_reason(tmp_path):
    # a 16-GPU fat-tree cannot hold tp 8 x dp 4 = 32 ranks: the step's layout says so
    grid = parse_grid({"kind": "fabric", "fixed": {**SMALL["fixed"], "traffic": "step", "tp": 8, "dp": 4,
                                                   "dp_bytes": "1MB"}})
    summary = _run(tmp_path / "out.csv", grid)
    header, row = _rows(tmp_path / "out.csv")
    assert summary.errors == 1 and row[header.index("completion_time_s")] == ""
    assert "32" in row[header.index("error")]


def test_resume_after_interruption_keeps_finished_rows_and_gives_the_uninterrupted_file(tmp_path):
    grid = parse_grid(SMALL)
    whole = tmp_path / "whole.csv"
    _run(whole, grid)
    part = tmp_path / "part.csv"
    seen = []

    def interrupt_after_three(row):
        seen.append(row["point"])
        if len(seen) == 3:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        _run(part, grid, on_row=interrupt_after_three)
    kept = _rows(part)
    assert [r[0] for r in kept[1:]] == seen  # every finished point is in the file, nothing else
    with open(part, "a") as f:  # a kill in the middle of writing a row leaves half a line
        f.write(kept[1][0][:5] + "deadbeef,1,all_re")
    summary = _run(part, grid)
    assert (summary.skipped, summary.ran) == (3, 5)
    assert part.read_bytes() == whole.read_bytes()  # same rows, grid order
    again = _run(part, grid)
    assert (again.skipped, again.ran) == (8, 0)


def test_one_worker_and_two_workers_give_identical_rows(tmp_path):
    grid = parse_grid(SMALL)
    _run(tmp_path / "one.csv", grid, workers=1)
    _run(tmp_path / "two.csv", grid, workers=2)
    assert (tmp_path / "one.csv").read_bytes() == (tmp_path / "two.csv").read_bytes()
    rows = _rows(tmp_path / "one.csv")
    assert len(rows) == 1 + 8 and all(r[-1] == "" for r in rows[1:])  # no errors


def test_output_of_another_grid_is_refused(tmp_path):
    out = tmp_path / "out.csv"
    _run(out, parse_grid(SMALL))
    other = parse_grid({**SMALL, "grid": {"routing": ["ecmp"]}, "fixed": {**SMALL["fixed"], "nodes": 4}})
    with pytest.raises(ConfigError, match="--out"):
        open_rows(out, columns_of(other))


def test_output_must_be_csv_or_parquet(tmp_path):
    with pytest.raises(ConfigError, match=r"\.csv or \.parquet"):
        open_rows(tmp_path / "out.json", ("point",))


def test_estimate_grid_rows(tmp_path):
    # gpt2 on 1 to 2 nodes of 8 A100: the rows are the estimate's own numbers
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario

    # micro-batch 400 of 1,024 tokens does not fit in 80 GiB: numbers anyway, fits_in_memory False
    grid = parse_grid({"kind": "estimate", "fixed": {"model": "gpt2", "gpu": "a100-80gb", "gpus_per_node": 8},
                       "grid": {"nodes": [1, 2], "micro_batch": [4, 400]}})
    _run(tmp_path / "est.csv", grid)
    header, *rows = _rows(tmp_path / "est.csv")
    assert len(rows) == 4
    for row in rows:
        nodes, micro = int(row[header.index("nodes")]), int(row[header.index("micro_batch")])
        want = estimate(build_scenario({"model": "gpt2", "gpu": "a100-80gb", "gpus_per_node": 8,
                                        "micro_batch": micro, "nodes": nodes}), allow_oom=True)
        assert float(row[header.index("step_time_s")]) == want.step_time
        assert float(row[header.index("mfu")]) == want.mfu
        assert float(row[header.index("memory_per_gpu_bytes")]) == want.memory_per_gpu
        assert row[header.index("fits_in_memory")] == str(micro == 4) and row[-1] == ""


def test_estimate_grid_reads_a_relative_model_config_from_the_grid_files_folder(tmp_path, monkeypatch):
    # a grid in sweeps/ names "llama3-8b.json" beside it; the sweep runs from another folder (the
    # cwd holds no such file): the point reads the file beside the grid, as a scenario file does,
    # and its row is the estimate of that file; the row still shows the path as written
    import shutil
    from pathlib import Path

    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario

    folder = tmp_path / "sweeps"
    folder.mkdir()
    config = folder / "llama3-8b.json"
    shutil.copy(Path(__file__).parents[1] / "data/hf_configs/llama3-8b.json", config)
    grid_file = folder / "grid.toml"
    grid_file.write_text('kind = "estimate"\n[fixed]\nmodel = "llama3-8b.json"\ngpu = "h100"\n'
                         'gpus_per_node = 8\nseq_len = 4096\n[grid]\nnodes = [1, 2]\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    grid = load_grid(grid_file)
    _run(elsewhere / "est.csv", grid, workers=2)  # the folder reaches the worker processes too
    header, *rows = _rows(elsewhere / "est.csv")
    assert len(rows) == 2
    for row in rows:
        assert row[-1] == "" and row[header.index("model")] == "llama3-8b.json"
        want = estimate(build_scenario({"model": str(config), "gpu": "h100", "gpus_per_node": 8, "seq_len": 4096,
                                        "nodes": int(row[header.index("nodes")])}), allow_oom=True)
        assert float(row[header.index("step_time_s")]) == want.step_time
    # the same grid parsed without its folder reads from the cwd: no such file there, an error row
    _run(elsewhere / "cwd.csv", parse_grid({"kind": "estimate", "fixed": {
        "model": "llama3-8b.json", "gpu": "h100", "gpus_per_node": 8, "seq_len": 4096, "nodes": 1}}))
    header, row = _rows(elsewhere / "cwd.csv")
    assert "llama3-8b.json" in row[-1] and row[header.index("step_time_s")] == ""


# ------------------------------------------------------------------ the optional extras
def test_parquet_resume_and_same_rows_as_csv(tmp_path):
    pq = pytest.importorskip("pyarrow.parquet")
    grid = parse_grid(SMALL)
    _run(tmp_path / "rows.csv", grid)
    out = tmp_path / "rows.parquet"
    with pytest.raises(KeyboardInterrupt):
        _run(out, grid, on_row=lambda row: (_ for _ in ()).throw(KeyboardInterrupt))
    assert pq.read_table(out).num_rows == 1  # the finished point was kept
    assert _run(out, grid).skipped == 1
    table = pq.read_table(out).to_pylist()
    header, *rows = _rows(tmp_path / "rows.csv")
    assert [r["point"] for r in table] == [r[0] for r in rows]
    at = header.index("completion_time_s")
    assert [r["completion_time_s"] for r in table] == [float(r[at]) for r in rows]


def test_parquet_without_pyarrow_says_which_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    with pytest.raises(MissingDependency, match=r"willitscale\[parquet\]"):
        open_rows(tmp_path / "out.parquet", ("point",))


def test_ray_without_ray_says_which_extra(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependency, match=r"willitscale\[ray\]"):
        _run(tmp_path / "out.csv", parse_grid(SMALL), ray_address="127.0.0.1:1")


def test_cli_sweep_writes_and_resumes(cli, tmp_path):
    grid = tmp_path / "grid.toml"
    grid.write_text('kind = "fabric"\nseeds = [1]\n[fixed]\ntopology = "fat-tree"\nk = 4\ngpus_per_node = 4\n'
                    'size = "8MB"\n[grid]\nrouting = ["ecmp", "spray"]\n')
    out = tmp_path / "out.csv"
    code, _, err = cli("sweep", str(grid), "--out", str(out), "--workers", "1")
    assert code == 0 and "2 points run" in err
    code, _, err = cli("sweep", str(grid), "--out", str(out), "--workers", "1")
    assert code == 0 and "2 skipped" in err
    code, _, err = cli("sweep", str(grid), "--out", str(out), "--workers", "0")
    assert code == 2 and "--workers = 0" in err


def test_sigterm_keeps_every_finished_row_and_a_rerun_finishes(tmp_path):
    import os
    import signal
    import subprocess
    import time

    grid = tmp_path / "grid.toml"
    # 24 points of a 32-server rail-optimized fabric: long enough to be stopped half way
    grid.write_text('kind = "fabric"\nseeds = "1-12"\n[fixed]\nnodes = 32\nsize = "64MB"\n'
                    '[grid]\nrouting = ["ecmp", "adaptive"]\n')
    out = tmp_path / "out.csv"
    argv = [sys.executable, "-m", "willitscale", "sweep", str(grid), "--out", str(out), "--workers", "2",
            "--no-progress"]
    proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.05)
    os.kill(proc.pid, signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept = _rows(out)
    assert 3 <= len(kept) < 1 + 24 and all(len(r) == len(kept[0]) for r in kept)
    assert "run the same command again" in err
    rerun = subprocess.run(argv, stderr=subprocess.PIPE, text=True, timeout=300)
    assert rerun.returncode == 0 and f"{len(kept) - 1} skipped" in rerun.stderr
    rows = _rows(out)
    assert len(rows) == 1 + 24 and {r[0] for r in kept[1:]} <= {r[0] for r in rows[1:]}


def test_ctrl_c_on_the_process_group_stops_workers_quietly_and_keeps_rows(tmp_path, terminal):
    import subprocess
    import time

    grid = tmp_path / "grid.toml"
    grid.write_text('kind = "fabric"\nseeds = "1-12"\n[fixed]\nnodes = 32\nsize = "64MB"\n'
                    '[grid]\nrouting = ["ecmp", "adaptive"]\n')
    out = tmp_path / "out.csv"
    proc = terminal([sys.executable, "-m", "willitscale", "sweep", str(grid), "--out", str(out), "--workers", "2",
                     "--no-progress"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and (not out.exists() or len(out.read_text().splitlines()) < 3):
        time.sleep(0.05)
    terminal.ctrl_c(proc)  # the whole group, workers included, as a terminal does
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Traceback" not in err  # the workers ignore SIGINT and are stopped by the parent
    kept = _rows(out)
    assert 3 <= len(kept) < 1 + 24 and all(len(r) == len(kept[0]) for r in kept)


def test_fabric_rows_are_the_simulators_numbers(tmp_path):
    # a step and a collective on a 12-GPU fat-tree (k = 4, 4 GPUs per server, 4:1 at the spine),
    # each computed again here through the fabric API with the same seed
    from willitscale.fabric.collective import simulate_collective
    from willitscale.fabric.simulator import simulate
    from willitscale.fabric.step import ParallelLayout, StepComm, step_traffic
    from willitscale.topology import build_topology, parse_routing

    fixed = {"topology": "fat-tree", "k": 4, "gpus_per_node": 4, "oversubscription": 4}
    grid = parse_grid({"kind": "fabric", "seeds": [3], "fixed": fixed, "points": [
        {"traffic": "step", "tp": 4, "dp": 3, "tp_bytes": "8MB", "dp_bytes": "64MB"},
        {"collective": "all_gather", "size": "32MB"}]})
    _run(tmp_path / "out.csv", grid)
    header, step_row, coll_row = _rows(tmp_path / "out.csv")
    topo = build_topology("fat-tree", k=4, gpus_per_node=4, oversubscription=4)
    routing = parse_routing("ecmp", seed=3)
    step = simulate(topo, step_traffic(topo, ParallelLayout(tp=4, dp=3), StepComm(tp_bytes=8e6, tp_count=1,
                                                                                    dp_bytes=64e6)), routing)
    coll = simulate_collective(topo, "all_gather", 32e6, routing=routing)
    at = header.index("completion_time_s")
    assert step_row[-1] == coll_row[-1] == ""  # no error
    assert float(step_row[at]) == step.completion_time
    assert float(coll_row[at]) == coll.completion_time
    assert float(coll_row[header.index("busbw_GBps")]) == coll.busbw / 1e9


def test_fabric_simulate_seeds_on_two_workers_print_what_one_prints(cli):
    argv = ("fabric", "simulate", "--topology", "fat-tree", "--k", "8", "--oversubscription", "2",
            "--routing", "ecmp", "--seeds", "1-4", "--size", "64MB", "--json")
    code1, one, _ = cli(*argv)
    code2, two, _ = cli(*argv, "--workers", "2")
    assert code1 == code2 == 0 and one == two
    code, _, err = cli(*argv, "--workers", "0")
    assert code == 2 and "--workers = 0" in err


def test_fabric_simulate_step_jobs_and_incast_seeds_on_two_workers_print_what_one_prints(cli):
    # the streams' seeds (--step, --jobs, --incast) run on the pool like a collective's: each
    # seed's simulation is deterministic, so the pool must print exactly what one process prints
    base = ("fabric", "simulate", "--topology", "fat-tree", "--k", "16", "--nodes", "8", "--oversubscription", "2",
            "--routing", "ecmp", "--seeds", "1-3", "--json")
    for extra in (("--step", "--tp", "4", "--dp", "8", "--tp-bytes", "8MB", "--tp-count", "1",
                   "--dp-bytes", "64MB"),
                  ("--jobs", "2", "--size", "16MB"),
                  ("--incast", "4", "--size", "16MB")):
        code1, one, err1 = cli(*base, *extra)
        code2, two, err2 = cli(*base, *extra, "--workers", "2")
        assert code1 == code2 == 0, (err1, err2)
        assert one == two
        assert '"worst_seed"' in one


def test_a_fabric_row_names_the_fidelity_that_ran(tmp_path):
    # 32 servers x 8 GPUs = 256 GPUs: auto runs the exact simulation (coarse is above 16,384 GPUs);
    # a point asking for coarse gets coarse, and the fidelity_ran column says which ran
    grid = parse_grid({"kind": "fabric", "fixed": {"nodes": 32, "size": "64MB"},
                       "grid": {"fidelity": ["auto", "coarse"]}})
    out = tmp_path / "rows.csv"
    run_sweep(grid, open_rows(out, columns_of(grid)))
    with out.open() as f:
        ran = {r["fidelity"]: r["fidelity_ran"] for r in csv.DictReader(f)}
    assert ran == {"auto": "exact", "coarse": "coarse"}
