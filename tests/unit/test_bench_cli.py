"""The bench and results commands without torch: a clear message, and the store's views."""

from __future__ import annotations

import csv
import io
import json
import sys

import pytest

from willitscale.collectives.ops import Op
from willitscale.results.records import CollectiveRow
from willitscale.results.store import Store


def test_without_torch_the_message_names_the_extra(cli, monkeypatch):
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` now raises ImportError
    code, out, err = cli("bench", "collectives", "--nproc", "2")
    assert code == 2 and out == ""
    assert "pip install 'willitscale[bench]'" in err


def _run(time_per_mb: float, label: str = "") -> int:
    with Store() as store:
        run = store.start_run("collectives", options={"iters": 20}, label=label, environment={
            "world_size": 2, "nodes": 1, "ranks_per_node": 2, "backend": "gloo", "devices": ["cpu"]})
        for i, size in enumerate((1_000_000, 2_000_000)):
            row = CollectiveRow(op=Op.ALL_REDUCE, size_bytes=size, count=size // 4, dtype="float32",
                                redop="sum", root=-1, in_place=False, ranks=2,
                                time=time_per_mb * size / 1e6, wrong=0)
            store.add_row(run, i, row.to_json())
        store.finish_run(run, "complete")
    return run


def test_list_show_export(cli):
    a, b = _run(0.001, "first"), _run(0.002)
    listed = json.loads(cli("results", "list", "--json")[1])
    assert [r["id"] for r in listed] == [b, a]  # newest first
    # 1 MB in 1 ms = 1 GB/s busbw for 2 ranks (factor 2(2-1)/2 = 1)
    assert listed[1]["summary"] == "all_reduce: peak busbw 1 GB/s" and listed[1]["label"] == "first"
    shown = json.loads(cli("results", "show", str(a), "--json")[1])
    assert shown["id"] == a and len(shown["results"]) == 2
    code, text, _ = cli("results", "export", "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(text)))
    assert [int(r["run_id"]) for r in rows] == [a, a, b, b]
    assert float(rows[0]["busbw_GBps"]) == pytest.approx(1.0)
    code, out, err = cli("results", "show", "99")
    assert code == 2 and "run" in err and "1 to 2" in err


def test_compare_flags_the_slow_run(cli):
    ids = [_run(0.001), _run(0.001), _run(0.0013), _run(0.001)]
    report = json.loads(cli("results", "compare", "--json")[1])
    # the third run is 1/1.3 - 1 = -23% below the median busbw of 1 GB/s
    flagged = [r["run_id"] for r in report["runs"] if r["flagged"]]
    assert flagged == [ids[2]]
    assert report["points"][0]["median"] == pytest.approx(1.0) and report["points"][0]["runs"] == 4
    code, out, _ = cli("results", "compare")
    assert code == 0 and "DEVIATES" in out
