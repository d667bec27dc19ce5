"""The NCCL paths on real GPUs: skipped without CUDA, written to run on a GPU node as is."""

from __future__ import annotations

import json

import pytest

torch = pytest.importorskip("torch")

pytestmark = [pytest.mark.gpu, pytest.mark.distributed,
              pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA GPUs and NCCL")]


def _gpus() -> int:
    return min(2, torch.cuda.device_count())


def test_nccl_sweep_is_correct(cli):
    code, out, err = cli("bench", "collectives", "--nproc", str(_gpus()), "--ops", "all", "-b", "1MB",
                         "-e", "16MB", "-f", "4", "--mode", "both", "-d", "bf16", "-n", "5", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert rows and all(r["wrong"] == 0 for r in rows)
    listed = json.loads(cli("results", "show", "--json")[1])
    assert listed["environment"]["backend"] == "nccl"
    assert listed["environment"]["nccl"] and listed["environment"]["devices"][0].startswith("NVIDIA")


def test_ddp_step_on_gpus(cli):
    code, out, err = cli("bench", "train", "--nproc", str(_gpus()), "--model", "gpt2", "--seq-len",
                         "256", "--batch", "2", "--steps", "3", "--dtype", "bfloat16", "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["device"] != "cpu" and row["step_s"] > 0 and row["exposed_comm_s"] >= 0


def test_matmul_on_gpu(cli):
    code, out, err = cli("bench", "matmul", "--nproc", "1", "--sizes", "4096", "--dtypes", "bf16",
                         "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["achieved_TFLOPS"] > 1  # any datacenter GPU does > 1 TFLOP/s in bf16
