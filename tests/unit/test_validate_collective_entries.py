"""`validate` predicts a collective sweep's rows by the calibration's matching ``[[collective]]``
entry (same library, op, pair the run ran and geometry) and by the ``[[link]]`` fits otherwise,
and says which it used."""

from __future__ import annotations

import json

import pytest

from willitscale.collectives.ops import Op
from willitscale.results.records import CollectiveRow

SIZES = [1e3, 1e5, 1e6, 1e7, 1e8, 1e9]
# the measured rows: 30 us + S / 100 GB/s (a forced Ring/Simple all_reduce on 1 x 8 ranks)
LATENCY, ALGBW = 30e-6, 100e9
# the calibration's intra-node link, deliberately another line: 5 us per ring step, 150 GB/s
LINK = ('[[link]]\nlevel = "intra_node"\nbandwidth_GBps = 150.0\nlatency_us = 5.0\nbackend = "nccl"\n'
        'op = "all_reduce"\nalgorithm = "ring"\nranks = 8\nranks_per_node = 8\nruns = [99]\n')


def _entry(algorithm="Ring", protocol="Simple", nodes=1, rpn=8):
    return (f'[[collective]]\nbackend = "nccl"\nop = "all_reduce"\nalgorithm = "{algorithm}"\n'
            f'protocol = "{protocol}"\nnodes = {nodes}\nranks_per_node = {rpn}\n'
            f"latency_us = {LATENCY * 1e6}\nalgbw_GBps = {ALGBW / 1e9}\nruns = [99]\n")


def _store_run(nodes=1, rpn=8, algo="Ring", proto="Simple") -> int:
    from willitscale.results.store import Store

    hosts = [{"node": f"n{i}", "env": {"NCCL_ALGO": algo, "NCCL_PROTO": proto}} for i in range(nodes)]
    env = {"world_size": nodes * rpn, "nodes": nodes, "ranks_per_node": rpn, "backend": "nccl",
           "devices": ["NVIDIA A100-SXM4-80GB"], "hosts": hosts}
    with Store() as store:
        run_id = store.start_run("collectives", options={}, environment=env)
        for i, s in enumerate(SIZES):
            row = CollectiveRow(op=Op.ALL_REDUCE, size_bytes=int(s), count=int(s) // 4, dtype="float32",
                                redop="sum", root=-1, in_place=False, ranks=nodes * rpn,
                                time=LATENCY + s / ALGBW, wrong=0)
            store.add_row(run_id, i, row.to_json())
        store.finish_run(run_id, "complete")
    return run_id


def _validate(cli, tmp_path, text, *ids):
    path = tmp_path / "cal.toml"
    path.write_text("format = 2\nruns = [99]\n" + text)
    code, out, err = cli("validate", "--calibration", str(path), "--json", *map(str, ids))
    assert code == 0, err
    return json.loads(out)


def test_a_matching_entry_predicts_the_rows_and_is_named(cli, tmp_path):
    run = _store_run()
    report = _validate(cli, tmp_path, LINK + _entry(), run)
    rows = report["rows"]
    assert len(rows) == len(SIZES)
    for r in rows:
        # the entry's line at the row's size, not the link's ring form
        assert r["predicted_s"] == pytest.approx(LATENCY + r["size_bytes"] / ALGBW, rel=1e-12)
        assert r["predicted_by"] == "[[collective]] nccl all_reduce Ring/Simple on 1 x 8 (runs 99)"
        assert r["algorithm"] == "NCCL Ring/Simple" and "[[collective]] entry" in r["point"]
        assert r["in_sample"] is False  # the entry was fitted to run 99, not this one


def test_without_a_matching_pair_the_link_fits_predict(cli, tmp_path):
    run = _store_run()
    report = _validate(cli, tmp_path, LINK + _entry("Tree", "Simple"), run)  # the run forced Ring
    for r in report["rows"]:
        # ring all_reduce over 8 ranks on the link: 2(n-1) alpha + 2(n-1)/n S / B
        # = 14 x 5 us + 1.75 S / 150 GB/s
        assert r["predicted_s"] == pytest.approx(14 * 5e-6 + 1.75 * r["size_bytes"] / 150e9, rel=1e-9)
        assert r["predicted_by"] == "[[link]] intra_node" and "[[link]] fits" in r["point"]


def test_an_entry_alone_predicts_and_a_run_it_cannot_is_skipped_with_why(cli, tmp_path):
    inside, across = _store_run(), _store_run(nodes=2)
    report = _validate(cli, tmp_path, _entry(), inside, across)
    assert {r["run_id"] for r in report["rows"]} == {inside}
    (skipped,) = report["skipped"]
    assert skipped["run_id"] == across
    assert "no [[collective]] entry" in skipped["reason"] and "has no intra_node fit" in skipped["reason"]
    # an NCCL run that let NCCL pick per size is not matched to a pair it may not have run
    unforced = _store_run(algo="", proto="")
    report = _validate(cli, tmp_path, _entry(), unforced)
    assert report["rows"] == [] and report["skipped"][0]["run_id"] == unforced


def test_an_emulated_uplink_is_matched_after_its_round_trip_through_the_file():
    # an emulated uplink of 67 Mbit/s is 8,375,000 bytes/s; the calibration writes it in GB/s
    # (0.008375) and reads it back as 0.008375 x 1e9, which is not bit-for-bit the run's rate
    from willitscale.calibrate.validate import same_uplink
    from willitscale.hardware.calibration import Calibration, LinkCalibration

    rate = 67e6 / 8
    cal = Calibration(links=(LinkCalibration(level="inter_node", bandwidth=5e6, latency=1e-4,
                                             backend="gloo", runs=(1,), nominal_bandwidth=rate),),
                      created="2026-01-01T00:00:00+00:00", runs=(1,), setup="gloo, cpu", source="test")
    import tomllib

    read = Calibration.from_toml_data(tomllib.loads(cal.to_toml())).link("inter_node").nominal_bandwidth
    assert read != rate  # the case this guards: the file's decimal is not the run's float
    assert same_uplink(read, rate) and same_uplink(None, None)
    assert not same_uplink(read, 2 * rate) and not same_uplink(None, rate) and not same_uplink(read, None)
