"""A 2-rank Gloo sweep with exact correctness checks, through the CLI and its spawner."""

from __future__ import annotations

import json

import pytest

from willitscale.bench.sweep import collective_shape
from willitscale.collectives.ops import Op

pytestmark = pytest.mark.distributed


def test_every_op_is_correct_in_both_modes(capfd):
    from willitscale.cli.main import main

    code = main(["bench", "collectives", "--nproc", "2", "--ops", "all", "-b", "1kB", "-e", "64kB",
                 "-f", "8", "--mode", "both", "-n", "2", "-w", "1", "--json"])
    out, err = capfd.readouterr()  # rank 0 is a child process: its stderr is the fd's
    assert code == 0, err
    rows = json.loads(out)
    ops = {r["op"] for r in rows}
    assert ops == {op.value for op in Op}
    assert all(r["wrong"] == 0 for r in rows)
    # sizes 1 kB, 8 kB, 64 kB; torch.distributed has both buffer modes only for all_gather and
    # reduce_scatter (6 rows each); all_reduce/broadcast/reduce run only in place and
    # all_to_all/send_recv only out of place (3 rows each), labelled as measured
    modes = {op: sorted({r["in_place"] for r in rows if r["op"] == op}) for op in ops}
    per_op = {op: sum(r["op"] == op for r in rows) for op in ops}
    both = ("all_gather", "reduce_scatter")
    assert per_op == {op: (6 if op in both else 3) for op in ops}
    assert modes == {op: ([False, True] if op in both else
                          [True] if op in ("all_reduce", "broadcast", "reduce") else [False])
                     for op in ops}
    assert "runs all_reduce only in place" in err and "runs send_recv only out of place" in err
    for r in rows:
        # every reported size is the rounded one (see test_bench_sweep for the rules)
        shape = collective_shape(Op(r["op"]), r["size_bytes"], 4, 2)
        assert shape.size_bytes == r["size_bytes"] and shape.param_count == r["count"]
        assert r["time_us"] > 0 and r["busbw_GBps"] > 0
    code, out = main(["results", "list", "--json"]), capfd.readouterr().out
    listed = json.loads(out)
    assert listed[0]["kind"] == "collectives" and listed[0]["rows"] == len(rows)
    assert listed[0]["status"] == "complete" and listed[0]["world_size"] == 2


def test_acceptance_invocation_shape(cli):
    code, out, err = cli("bench", "collectives", "--nproc", "2", "--ops", "all_reduce", "-b", "1MB",
                         "-e", "4MB", "-f", "2", "-n", "3", "-w", "1", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["size_bytes"] for r in rows] == [1_000_000, 2_000_000, 4_000_000]
    for r in rows:
        assert {"size_bytes", "time_us", "algbw_GBps", "busbw_GBps", "wrong"} <= set(r)
        assert r["wrong"] == 0
        # 2 ranks: busbw = algbw x 2(2-1)/2 = algbw = size / time
        assert r["busbw_GBps"] == pytest.approx(r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9)


def test_plot_draws_the_measured_sweep_and_says_what_predicts_it(tmp_path, capfd):
    pytest.importorskip("matplotlib")
    from willitscale.cli.main import main

    figs = tmp_path / "figs"
    code = main(["bench", "collectives", "--nproc", "2", "--ops", "all_reduce", "-b", "64kB",
                 "-e", "256kB", "-n", "2", "-w", "1", "--plot", str(figs)])
    err = capfd.readouterr().err  # rank 0 is a child process: its stderr is the fd's
    assert code == 0, err
    assert {p.name for p in figs.iterdir()} == {"busbw.png", "busbw.svg"}
    # 2 CPU ranks on one node, no calibration: nothing can predict it, and the message says why
    assert "no prediction: no calibration yet; cpu is not a catalog GPU" in err
    assert "measured: all_reduce, 2 ranks" in (figs / "busbw.svg").read_text()
