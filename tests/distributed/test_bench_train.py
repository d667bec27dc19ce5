"""A 2-rank DDP training step of the built-in model on Gloo, and a matmul sweep."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.distributed


def test_ddp_step_and_its_parts(cli):
    code, out, err = cli("bench", "train", "--nproc", "2", "--model", "gpt2-tiny", "--seq-len", "32",
                         "--batch", "2", "--steps", "2", "-w", "1", "--bucket-size", "256KiB", "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["ranks"] == 2 and row["nodes"] == 1
    # the workload's count for gpt2-tiny: 2 x (4*128^2 + 4*128 + 2*128*512 + 512 + 128 + 4*128)
    # + 256*128 + 512*128 + 2*128 = 495,104
    assert row["params"] == 495_104
    assert row["bucket_bytes"] == 256 * 1024
    for part in ("step_s", "forward_s", "backward_s", "backward_no_sync_s", "optimizer_s"):
        assert row[part] > 0
    assert row["exposed_comm_s"] >= 0
    # the step is made of its parts: each step's are its slowest rank's, averaged over steps
    parts = row["forward_s"] + row["backward_s"] + row["optimizer_s"]
    assert row["step_s"] == pytest.approx(parts, rel=1e-12)
    # torch 2.13 applies an explicit bucket cap to DDP's first bucket too; older torch kept
    # its 1 MiB default for it (see bench.train)
    import torch

    assert row["first_bucket_bytes"] in (256 * 1024, torch.distributed._DEFAULT_FIRST_BUCKET_BYTES)
    # 2 ranks x 2 sequences x 32 tokens per step
    assert row["tokens_per_s"] == pytest.approx(128 / row["step_s"])


def test_matmul(cli):
    code, out, err = cli("bench", "matmul", "--nproc", "1", "--sizes", "64,32x16x8", "--dtypes",
                         "float32,bfloat16", "-n", "2", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [(r["m"], r["n"], r["k"], r["type"]) for r in rows] == [
        (64, 64, 64, "float32"), (32, 16, 8, "float32"), (64, 64, 64, "bfloat16"), (32, 16, 8, "bfloat16")]
    # 2 x 32 x 16 x 8 = 8192 FLOP per product
    assert rows[1]["flops"] == 8192
    assert all(r["achieved_TFLOPS"] > 0 for r in rows)


@pytest.mark.parametrize("name", ["gpt2-tiny", "gpt2-mini", "gpt2", "llama-tiny", "llama-1b"])
def test_built_model_has_the_workload_parameter_count(name):
    # the torch module and the workload's formula are written independently: they must agree
    # (llama-1b: 1,235,814,400, the parameter count of Llama 3.2 1B; built on the meta device)
    import torch

    from willitscale.bench.models import bench_model, build_bench_model
    from willitscale.workload.params import param_count

    shape = bench_model(name)
    with torch.device("meta"):
        built = sum(p.numel() for p in build_bench_model(shape).parameters())
    assert built == param_count(shape).total
    if name == "llama-1b":
        assert built == 1_235_814_400


def test_llama_style_step_on_cpu(cli):
    import json

    code, out, err = cli("bench", "train", "--nproc", "1", "--backend", "gloo", "--model", "llama-tiny", "--seq-len", "64",
                         "--batch", "2", "--steps", "2", "-w", "1", "--json")
    assert code == 0, err
    (row,) = json.loads(out)
    assert row["model"] == "llama-tiny" and row["params"] == 459_392 and row["step_s"] > 0
    assert row["peak_allocated_bytes"] is None  # no GPU: no allocator peak, and it says so
