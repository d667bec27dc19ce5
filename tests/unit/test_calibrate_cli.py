"""calibrate + validate on runs written straight into the store (no torch needed)."""

from __future__ import annotations

import json

import pytest

from willitscale.collectives.ops import Op
from willitscale.results.records import CollectiveRow, MatmulRow, TrainRow
from willitscale.results.store import Store


def _env(nodes: int, rpn: int, uplink: float | None = None, hosts=None) -> dict:
    return {"world_size": nodes * rpn, "nodes": nodes, "ranks_per_node": rpn, "backend": "gloo",
            "devices": ["cpu"], "emulated": {"uplink_Bps": uplink} if uplink else None,
            **({"hosts": hosts} if hosts else {})}


def test_nics_per_node_from_the_recorded_topology():
    # a real cluster's hosts carry their `nvidia-smi topo -m` (NIC legend NIC0..NIC7): 8 NICs
    from willitscale.calibrate.runs import _nics

    topo = {"nics": {f"NIC{i}": f"mlx5_{i}" for i in range(8)}}
    assert _nics({"hosts": [{"topology": topo}, {"topology": topo}]}, {}) == 8
    assert _nics({"hosts": [{"topology": None}]}, {}) is None  # not recorded: unknown
    assert _nics({}, {"uplink_Bps": 25e6}) == 1  # emulated: one shaped uplink per node


def _store_run(kind, env, rows) -> int:
    with Store() as store:
        run = store.start_run(kind, options={}, environment=env)
        for i, row in enumerate(rows):
            store.add_row(run, i, row.to_json())
        store.finish_run(run, "complete")
    return run


def _all_reduce(sizes, n, alpha, B, op=Op.ALL_REDUCE):
    # ring all-reduce by hand: 2(n-1) alpha + 2(n-1)/n S / B
    return [CollectiveRow(op=op, size_bytes=int(S), count=int(S) // 4, dtype="float32", redop="sum",
                          root=-1, in_place=False, ranks=n,
                          time=2 * (n - 1) * alpha + 2 * (n - 1) / n * S / B, wrong=0) for S in sizes]


def test_latest_run_is_calibrated_and_every_row_validated(cli):
    # an emulated 2 x 1 cluster at 25 MB/s achieving 23.5 MB/s with 1 ms per step
    run = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([4e6, 8e6, 16e6, 32e6], 2, 1e-3, 23.5e6))
    code, out, err = cli("calibrate", "--json")
    assert code == 0, err
    result = json.loads(out)
    (link,) = result["links"]
    assert link["level"] == "inter_node" and link["runs"] == [run]
    assert link["bandwidth_GBps"] == pytest.approx(0.0235, rel=1e-6)
    assert link["latency_us"] == pytest.approx(1000, rel=1e-4)
    assert link["efficiency"] == pytest.approx(0.94)  # 23.5 / 25
    # what it was measured on, so an estimate can tell a cluster it does not describe: Gloo on
    # CPUs, one rank per node, one shaped uplink per emulated node
    assert (link["backend"], link["device"], link["ranks_per_node"], link["nics_per_node"]) == (
        "gloo", "cpu", 1, 1)
    code, out, err = cli("validate", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert len(report["rows"]) == 4
    assert all(r["in_sample"] and abs(r["error"]) < 1e-6 for r in report["rows"])


def test_out_of_sample_rows_and_skipped_runs(cli):
    fitted = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([4e6, 32e6], 2, 1e-3, 23.5e6))
    # a later run on the same link, other sizes: predicted, not in-sample
    later = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([1e6, 2e6], 2, 1e-3, 23.5e6))
    # a run on another uplink and a single-node run: not predictable by this calibration
    other = _store_run("collectives", _env(2, 1, 62.5e6), _all_reduce([4e6], 2, 1e-3, 60e6))
    single = _store_run("collectives", _env(1, 2), _all_reduce([4e6], 2, 1e-4, 1e9))
    assert cli("calibrate", str(fitted))[0] == 0
    report = json.loads(cli("validate", "--json")[1])
    by_run = {}
    for r in report["rows"]:
        by_run.setdefault(r["run_id"], []).append(r)
    assert set(by_run) == {fitted, later}
    assert all(not r["in_sample"] and abs(r["error"]) < 1e-6 for r in by_run[later])
    reasons = {s["run_id"]: s["reason"] for s in report["skipped"]}
    assert "uplink" in reasons[other] and "intra_node" in reasons[single]


def test_both_levels_and_compute(cli, tmp_path):
    inter = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([1e6, 8e6, 64e6], 2, 2e-4, 24e6))
    intra = _store_run("collectives", _env(1, 2), _all_reduce([1e6, 8e6, 64e6], 2, 5e-5, 1.5e9))
    matmul = _store_run("matmul", _env(1, 1), [MatmulRow(m=512, n=512, k=512, dtype="float32",
                                                         device="cpu", time=2 * 512**3 / 50e9)])
    # gpt2-tiny, seq 64, 2 sequences per rank: executed FLOPs per rank from the workload count
    train = _store_run("train", _env(1, 2), [TrainRow(
        model="gpt2-tiny", layers=2, hidden=128, heads=4, vocab=256, seq_len=64, params=495_104,
        batch_per_rank=2, ranks=2, nodes=1, dtype="float32", bucket_bytes=2**20, device="cpu",
        step=0.02, forward=0.004, backward=0.012, backward_no_sync=0.011, optimizer=0.004, steps=3)])
    out_file = tmp_path / "cal.toml"
    code, out, err = cli("calibrate", str(inter), str(intra), str(matmul), str(train), "-o",
                         str(out_file), "--json")
    assert code == 0, err
    result = json.loads(out)
    assert {link["level"] for link in result["links"]} == {"intra_node", "inter_node"}
    (compute,) = result["compute"]
    # peak = the matmul rate: 2 x 512^3 FLOP in 2 x 512^3 / 50e9 s = 50 GFLOP/s
    assert compute["peak_TFLOPS"] == pytest.approx(0.05)
    # achieved = executed FLOPs of the step as the estimate counts them for the benchmark's
    # causal fused attention, by hand for gpt2-tiny (h 128, 2 layers, vocab 256) at s = 64:
    # per layer forward 24 h^2 = 393,216 dense + 4 h (s + 1)/2 = 16,640 unmasked scores and
    # their products = 409,856; head 2 h V = 65,536; backward 2x forward; FlashAttention reruns
    # Q K^T in backward: 2 h (s + 1)/2 = 8,320 per layer. Per token 3 (2 x 409,856 + 65,536) +
    # 2 x 8,320 = 2,672,384; x 64 tokens x 2 sequences over forward + no_sync backward (15 ms)
    executed = 2_672_384 * 64 * 2
    assert compute["achieved_TFLOPS"] == pytest.approx(executed / 0.015 / 1e12)
    assert out_file.exists()
    from willitscale.hardware.calibration import load_calibration

    cal = load_calibration(out_file)
    # optimizer: 4 ms over 495,104 parameters
    assert cal.compute[0].optimizer_time_per_param == pytest.approx(0.004 / 495_104)


def test_plots_of_a_run_and_of_validate(cli, tmp_path):
    pytest.importorskip("matplotlib")
    run = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([1e6, 4e6, 16e6], 2, 1e-3, 23.5e6))
    code, _, err = cli("results", "show", str(run), "--plot", str(tmp_path / "show"))
    assert code == 0, err
    assert (tmp_path / "show" / f"busbw-run{run}.png").stat().st_size > 0
    # no calibration yet: the emulated uplink (25 MB/s = 200 Mb/s) is the prediction, labelled so
    assert "predicted from the emulated uplink (200 Mb/s" in err
    svg = (tmp_path / "show" / f"busbw-run{run}.svg").read_text()
    assert "predicted: all_reduce, shaped uplink 200 Mb/s (Gloo ring)" in svg
    assert cli("calibrate")[0] == 0
    code, _, err = cli("results", "show", str(run), "--plot", str(tmp_path / "again"))
    assert code == 0, err
    assert "predicted from the calibration" in err and f"fitted to runs {run}" in err
    svg = (tmp_path / "again" / f"busbw-run{run}.svg").read_text()
    # calibrate wrote the run's Gloo ring [[collective]] entry: the curve is its measured line
    assert "predicted: all_reduce, calibrated [[collective]] (Gloo ring)" in svg
    code, _, err = cli("validate", "--plot", str(tmp_path / "val"))
    assert code == 0, err
    assert {p.name for p in (tmp_path / "val").iterdir()} >= {"validate.png", "validate.svg",
                                                              "validate-busbw.png"}


def test_validate_compares_a_recorded_peak_memory(cli):
    inter = _store_run("collectives", _env(1, 2), _all_reduce([1e6, 8e6, 64e6], 2, 5e-5, 1.5e9))
    matmul = _store_run("matmul", _env(1, 1), [MatmulRow(m=512, n=512, k=512, dtype="float32",
                                                         device="cpu", time=2 * 512**3 / 50e9)])
    measured = 20_000_000
    train = _store_run("train", _env(1, 2), [TrainRow(
        model="gpt2-tiny", layers=2, hidden=128, heads=4, vocab=256, seq_len=64, params=495_104,
        batch_per_rank=2, ranks=2, nodes=1, dtype="float32", bucket_bytes=2**20, device="cpu",
        step=0.02, forward=0.004, backward=0.012, backward_no_sync=0.011, optimizer=0.004, steps=3,
        peak_allocated_bytes=measured, peak_reserved_bytes=24_000_000)])
    assert cli("calibrate", str(inter), str(matmul), str(train))[0] == 0
    code, out, err = cli("validate", "--json", str(train))
    assert code == 0, err
    (row,) = json.loads(out)["rows"]
    # fp32 DDP with gradient_as_bucket_view=True: 16 B/param of state, + cuBLAS's workspace, +
    # activations: more than the state alone; the error is (predicted - measured) / measured
    predicted = row["predicted_allocated_bytes"]
    assert predicted > 16 * 495_104 + 8_519_680
    assert row["memory_error"] == pytest.approx((predicted - measured) / measured)
    code, out, _ = cli("validate", str(train))
    assert code == 0 and "max_memory_allocated" in out


def _tiny_train(nodes: int, rpn: int) -> TrainRow:
    return TrainRow(model="gpt2-tiny", layers=2, hidden=128, heads=4, vocab=256, seq_len=64,
                    params=495_104, batch_per_rank=2, ranks=nodes * rpn, nodes=nodes,
                    dtype="float32", bucket_bytes=2**20, device="cpu", step=0.02, forward=0.004,
                    backward=0.012, backward_no_sync=0.011, optimizer=0.004, steps=3)


def test_no_ids_fits_the_newest_run_of_each_kind_on_one_setup(cli):
    # issue 17: with no ids calibrate took the latest run only, so a sweep followed by a training
    # run lost the sweep; a run on another uplink must not join them
    old = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([4e6, 32e6], 2, 1e-3, 20e6))
    sweep = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([4e6, 32e6], 2, 1e-3, 23.5e6))
    other = _store_run("collectives", _env(2, 1, 62.5e6), _all_reduce([4e6], 2, 1e-3, 60e6))
    train = _store_run("train", _env(2, 1, 25e6), [_tiny_train(2, 1)])
    code, out, err = cli("calibrate", "--json")
    assert code == 0, err
    result = json.loads(out)
    (link,) = result["links"]
    assert link["runs"] == [sweep]  # the newest sweep on the training run's uplink, not `old`
    assert link["bandwidth_GBps"] == pytest.approx(0.0235, rel=1e-6)
    assert [c["runs"] for c in result["compute"]] == [[train]]
    assert f"runs [{sweep}, {train}]" in err and str(other) in err and str(old) not in err


def test_runs_at_different_uplinks_are_refused(cli):
    a = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([4e6, 32e6], 2, 1e-3, 23.5e6))
    b = _store_run("collectives", _env(2, 1, 62.5e6), _all_reduce([4e6, 32e6], 2, 1e-3, 60e6))
    code, _, err = cli("calibrate", str(a), str(b))
    assert code == 2
    # 25 MB/s = 200 Mb/s, 62.5 MB/s = 500 Mb/s
    assert "200 Mb/s" in err and "500 Mb/s" in err and "separately" in err


def test_a_training_run_at_another_uplink_is_skipped_not_out_of_sample(cli):
    # issue 17: validate predicted it with the other link's figures and called +113% out of sample
    sweep = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([4e6, 32e6], 2, 1e-3, 23.5e6))
    train = _store_run("train", _env(2, 1, 25e6), [_tiny_train(2, 1)])
    elsewhere = _store_run("train", _env(2, 1, 62.5e6), [_tiny_train(2, 1)])
    assert cli("calibrate", str(sweep), str(train))[0] == 0
    report = json.loads(cli("validate", "--json")[1])
    assert {r["run_id"] for r in report["rows"]} >= {train}
    assert elsewhere not in {r["run_id"] for r in report["rows"]}
    reasons = {s["run_id"]: s["reason"] for s in report["skipped"]}
    assert "uplink" in reasons[elsewhere]


def test_plot_with_no_id_draws_the_newest_sweep(cli, tmp_path):
    pytest.importorskip("matplotlib")
    sweep = _store_run("collectives", _env(2, 1, 25e6), _all_reduce([1e6, 4e6], 2, 1e-3, 23.5e6))
    _store_run("train", _env(2, 1, 25e6), [_tiny_train(2, 1)])
    code, _, err = cli("results", "show", "--plot", str(tmp_path))
    assert code == 0, err
    assert (tmp_path / f"busbw-run{sweep}.png").stat().st_size > 0


def test_the_bench_model_is_known_to_estimate(cli):
    code, out, err = cli("estimate", "--model", "gpt2-tiny", "--gpu", "a100", "--json")
    assert code == 0, err
    # 2 layers x 12 h^2 (h 128) + 256 x 128 tied embedding + 512 x 128 positions + biases/norms
    assert json.loads(out)["params"] == 495_104


def test_a_calibration_without_a_gpu_names_what_it_measured(cli, tmp_path):
    _store_run("collectives", _env(2, 1, 25e6), _all_reduce([4e6, 32e6], 2, 1e-3, 23.5e6))
    _store_run("train", _env(2, 1, 25e6), [_tiny_train(2, 1)])
    path = tmp_path / "c.toml"
    assert cli("calibrate", "-o", str(path))[0] == 0
    code, _, err = cli("estimate", "--model", "gpt2", "--nodes", "2", "--calibration", str(path))
    assert code == 2 and "gpu" in err and "cpu" in err and "--gpu" in err
