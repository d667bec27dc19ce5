"""Under umask 000 nothing willitscale creates is writable by other users: the results store
and its folders are private (0600, 0700), and the files the CLI writes (exports, traces,
calibrations) are not group- or world-writable."""

from __future__ import annotations

import os
import stat

import pytest

from willitscale.collectives.ops import Op
from willitscale.results.records import CollectiveRow
from willitscale.results.store import Store, store_path


def _mode(path) -> int:
    return stat.S_IMODE(os.stat(path).st_mode)


@pytest.fixture
def open_umask():
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


def test_the_store_and_its_folders_are_private(tmp_path, open_umask):
    path = tmp_path / "a" / "b" / "results.sqlite"
    with Store(path) as store:
        run = store.start_run("matmul", options={}, environment={})
        store.add_row(run, 0, {"m": 1})
        # WAL mode: the -wal and -shm files exist while the store is open
        for made in (tmp_path / "a", tmp_path / "a" / "b"):
            assert _mode(made) == 0o700, made
        for made in (path, f"{path}-wal", f"{path}-shm"):
            assert _mode(made) == 0o600, made


def _fittable_run() -> None:
    env = {"world_size": 2, "nodes": 2, "ranks_per_node": 1, "backend": "gloo",
           "devices": ["cpu"], "emulated": {"uplink_Bps": 25e6}}
    with Store() as store:  # two sizes of a 2-rank all-reduce: a latency and a bandwidth
        run = store.start_run("collectives", options={}, environment=env)
        for i, size in enumerate((4e6, 8e6)):
            store.add_row(run, i, CollectiveRow(
                op=Op.ALL_REDUCE, size_bytes=int(size), count=int(size) // 4, dtype="float32",
                redop="sum", root=-1, in_place=False, ranks=2, time=2e-3 + size / 23.5e6,
                wrong=0).to_json())
        store.finish_run(run, "complete")


def test_what_the_cli_writes_is_not_writable_by_others(cli, tmp_path, open_umask):
    _fittable_run()
    assert _mode(store_path()) == 0o600 and _mode(store_path().parent) == 0o700
    code, _, err = cli("calibrate")
    assert code == 0, err
    (calibration,) = (store_path().parent / "calibrations").iterdir()
    assert _mode(calibration.parent) == 0o700
    exported, trace = tmp_path / "runs.csv", tmp_path / "trace.json"
    assert cli("results", "export", "-o", str(exported))[0] == 0
    code, _, err = cli("estimate", "--model", "gpt2", "--gpu", "a100", "--seq-len", "1024",
                       "--trace", str(trace))
    assert code == 0, err
    for made in (calibration, exported, trace):
        assert _mode(made) & 0o022 == 0, (made, oct(_mode(made)))
