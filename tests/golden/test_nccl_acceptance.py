"""Issue 12's acceptance lines for the NCCL collective model, against published nccl-tests rows.

Every measured figure below is a row of src/willitscale/validation/nccl_tests.toml (quoted
there with its citation); none was used to choose a constant except the two 'thanos' rows,
which sit on the fit side (said next to them). The tolerances are the issue's: 25% at 4 MiB,
10% at 1 GiB, and on the test rows from 1 MiB up a mean |busbw error| <= 10% and a worst
<= 30%. Where the model misses a target the test is a strict xfail stating the measured miss,
so it fails the day the model meets the target (and the docs must then be updated).
"""

from __future__ import annotations

import json

import pytest

from willitscale.validation.nccl_check import validation_report

# 8x A100 SXM4 on NVSwitch, all_reduce busbw (GB/s) published by nccl-tests:
#  thanos-a100-1n-mpi-allreduce (fit side): mpirun -np 8 ... -g 1, one process per GPU
#  thanos-a100-1n-g8-allreduce (fit side): one process driving 8 GPUs (-g 8)
#  galvatron-dgxa100-1n-allreduce (test side, graded doubtful): -g 8, DGX A100 40GB
THANOS_MPI = {4 << 20: 89.89, 1 << 30: 227.91}
THANOS_G8 = {4 << 20: 70.70, 1 << 30: 227.83}
GALVATRON_G8 = {4 << 20: 55.97, 1 << 30: 230.84}
TOLERANCE = {4 << 20: 0.25, 1 << 30: 0.10}


def _busbw(cli, size: str, *extra: str) -> dict:
    code, out, err = cli("collective", "all_reduce", "--size", size, "--ranks", "8", "--node", "dgx-a100",
                         "--json", *extra)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("size,size_bytes", [("4MiB", 4 << 20), ("1GiB", 1 << 30)])
def test_dgx_a100_one_process_per_gpu(cli, size, size_bytes):
    # the command as written (PyTorch's layout: one process per GPU) vs the mpirun run
    data = _busbw(cli, size)
    assert data["algorithm"] in {"Ring", "Tree"} and data["protocol"] in {"LL", "LL128", "Simple"}
    assert abs(data["busbw_GBps"] / THANOS_MPI[size_bytes] - 1) <= TOLERANCE[size_bytes]


@pytest.mark.parametrize("size,size_bytes", [("4MiB", 4 << 20), ("1GiB", 1 << 30)])
@pytest.mark.parametrize("published", [THANOS_G8, GALVATRON_G8], ids=["thanos-g8", "galvatron-g8"])
def test_dgx_a100_one_process_driving_8_gpus(cli, size, size_bytes, published):
    # nccl-tests -g 8: one process, 8 GPUs (NCCL's intra-process launch path)
    data = _busbw(cli, size, "--gpus-per-process", "8")
    assert data["algorithm"] and data["protocol"]
    assert abs(data["busbw_GBps"] / published[size_bytes] - 1) <= TOLERANCE[size_bytes]


def _from_1MiB(quality: str) -> dict:
    return validation_report("test", quality)["bands"]["from 1 MiB up"]


def test_test_rows_graded_good_mean_within_10_percent():
    # 177 test rows of the 16 sweeps graded good when the data was collected (before any
    # constant): mean |busbw error| 9.7% when this was written, 9.3% with NCCL's p2p schedule
    assert _from_1MiB("good")["mean_abs"] <= 0.10


@pytest.mark.xfail(strict=True, reason="worst test row +51.5% (gj-aion 2-node Ring with NCCL_MIN_CTAS=24, "
                   "1 MiB: the setting is applied as NCCL applies it (24 channels run) but NCCL's model "
                   "costs the search graph's channels, and the run's 157 us latency floor is not in it); "
                   "next li-plus sendrecv 128 MiB -30.5% (NCCL's p2p schedule: 8 of 32 channels, our "
                   "10 GB/s per channel); docs/collectives.md section 13")
def test_test_rows_graded_good_worst_within_30_percent():
    assert abs(_from_1MiB("good")["worst"]) <= 0.30


@pytest.mark.xfail(strict=True, reason="all test rows: mean 55.2%, worst +2628% -- the google-dranet "
                   "A4 all_gather sweep (graded doubtful with the data: 8 GB/s at 8 MiB where dstack's "
                   "A4 all_reduce shows 100) is predicted 2-27x faster than published")
def test_all_test_rows_mean_within_10_and_worst_within_30_percent():
    band = _from_1MiB("all")
    assert band["mean_abs"] <= 0.10 and abs(band["worst"]) <= 0.30


@pytest.mark.parametrize("side,rows", [("test", 288), ("fit", 375)])
def test_validate_nccl_tests_covers_every_stable_row_of_a_side(cli, side, rows):
    # the four bands of the split's rule 7 partition the side's usable, stable rows (SPLIT.md:
    # 288 test, 375 fit); "from 1 MiB up" is the three upper bands together
    code, out, err = cli("validate", "--nccl-tests", "--side", side, "--json")
    assert code == 0, err
    bands = json.loads(out)["bands"]
    four = [bands[name]["rows"] for name in ("< 1 MiB", "1-64 MiB", "64 MiB-1 GiB", ">= 1 GiB")]
    assert sum(four) == rows
    assert bands["from 1 MiB up"]["rows"] == sum(four[1:])
    for band in bands.values():  # |mean error| <= mean |error| (the triangle inequality)
        assert abs(band["bias"]) <= band["mean_abs"] + 1e-12
