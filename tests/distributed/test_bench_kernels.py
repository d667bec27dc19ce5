"""``bench attention`` and ``bench bandwidth`` through their CPU twins (Gloo, one rank): the
same code a GPU runs, on the backends a CPU has (FLASH_ATTENTION and MATH run on a CPU; cuDNN
and the memory-efficient kernel have no CPU kernel, so they give ``unsupported`` rows).
tests/distributed/test_bench_gpu.py runs them on a GPU."""

from __future__ import annotations

import json

import pytest

pytestmark = pytest.mark.distributed


def test_attention_rows_name_backend_flops_and_unsupported_reasons(cli):
    code, out, err = cli("bench", "attention", "--nproc", "1", "--backend", "gloo", "--backends", "flash,cudnn,efficient,math",
                         "--seq-lens", "128,256", "--head-dims", "32", "--hidden", "64",
                         "--tokens", "256", "--math-max-seq", "128", "--dtype", "float32",
                         "-w", "1", "-n", "2", "--json")
    assert code == 0, err
    rows = json.loads(out)
    # 4 backends x 2 sequence lengths x causal and full x forward and backward
    assert len(rows) == 4 * 2 * 2 * 2
    by = {(r["backend"], r["direction"], r["causal"], r["seq_len"]): r for r in rows}
    # s = 128: batch = 256 // 128 = 2, heads = 64 / 32 = 2, d = 32.
    # forward, full: 4 b h s^2 d = 4 x 2 x 2 x 128^2 x 32 = 8,388,608 FLOPs
    fwd = by[("FLASH_ATTENTION", "forward", False, 128)]
    assert (fwd["batch"], fwd["heads"]) == (2, 2)
    assert fwd["flops"] == 8_388_608
    assert by[("FLASH_ATTENTION", "forward", True, 128)]["flops"] == 8_388_608 / 2  # causal: half
    assert by[("FLASH_ATTENTION", "backward", False, 128)]["flops"] == 2.5 * 8_388_608  # 5 vs 2 products
    for (backend, _, _, seq), r in by.items():
        if backend == "FLASH_ATTENTION" or (backend == "MATH" and seq <= 128):
            assert r["status"] == "ok" and r["time_us"] > 0
            assert r["achieved_TFLOPS"] == pytest.approx(r["flops"] / (r["time_us"] * 1e-6) / 1e12)
        elif backend == "MATH":
            assert r["status"] == "skipped" and "--math-max-seq 128" in r["reason"]
        else:  # cuDNN and memory-efficient attention have no CPU kernel
            assert r["status"] == "unsupported" and r["reason"] and r["time_us"] is None
    stored = json.loads(cli("results", "show", "--json")[1])
    assert stored["kind"] == "attention" and len(stored["results"]) == len(rows)
    prov = stored["environment"]["provenance"]
    assert prov["device"] == "cpu" and prov["torch"] and prov["date"] and prov["host"]
    assert prov["absent"]["sm_clock_MHz"] == "a CPU run: no GPU clocks"


def test_bandwidth_rows_count_bytes_from_operands(cli):
    code, out, err = cli("bench", "bandwidth", "--nproc", "1", "--backend", "gloo", "--ops", "copy,add,layer_norm,adamw",
                         "--sizes", "65536", "--hidden", "1024", "--dtype", "float32", "-w", "1",
                         "-n", "3", "--json")
    assert code == 0, err
    rows = {r["op"]: r for r in json.loads(out)}
    # float32, 65,536 elements: copy reads and writes 4 B each = 524,288 B; add reads two and
    # writes one = 786,432 B; layer_norm (64 rows of 1024) like copy; AdamW 7 fp32 accesses
    # (param, grad, two moments read; param, two moments written) = 1,835,008 B
    assert rows["copy"]["size_bytes"] == 524_288
    assert rows["add"]["size_bytes"] == 786_432
    assert rows["layer_norm"]["size_bytes"] == 524_288
    assert rows["adamw"]["size_bytes"] == 1_835_008 and rows["adamw"]["type"] == "float32"
    for r in rows.values():
        assert r["achieved_GBps"] == pytest.approx(r["size_bytes"] / (r["time_us"] * 1e-6) / 1e9)


def test_fp8_matmul_through_scaled_mm_on_cpu(cli):
    code, out, err = cli("bench", "matmul", "--nproc", "1", "--backend", "gloo", "--sizes", "64x32x48",
                         "--dtypes", "fp8-tensorwise,fp8-rowwise", "-n", "2", "--json")
    assert code == 0, err
    rows = json.loads(out)
    assert [r["type"] for r in rows] == ["float8_e4m3fn-tensorwise", "float8_e4m3fn-rowwise"]
    assert all(r["flops"] == 2 * 64 * 32 * 48 and r["time_us"] > 0 for r in rows)


def test_calibrate_profile_writes_sections_and_provenance_from_cpu_runs(cli, tmp_path):
    # plumbing only: CPU rows fitted against an H100's peaks give meaningless constants; what is
    # checked is that every kernel run becomes its section and the runs' provenance its table
    for argv in (("bandwidth", "--ops", "copy", "--sizes", "65536,262144,1048576"),
                 ("attention", "--backends", "flash", "--seq-lens", "128,256", "--head-dims", "32",
                  "--hidden", "64", "--tokens", "256", "--causal", "causal", "--directions", "forward"),
                 ("matmul", "--sizes", "64,128,256", "--dtypes", "bf16")):
        code, _, err = cli("bench", *argv, "--nproc", "1", "--backend", "gloo", "-n", "2")
        assert code == 0, err
    out = tmp_path / "profile.toml"
    code, _, err = cli("calibrate", "1", "2", "3", "--profile", "--gpu", "h100-sxm", "-o", str(out))
    assert code == 0, err
    from willitscale.hardware.calibration import load_calibration

    cal = load_calibration(out)
    assert {k: len(v) for k, v in cal.sections.items()} == {"memory": 1, "gemm": 1, "attention": 1}
    assert cal.provenance.gpu == "h100-sxm" and cal.provenance.device == "cpu"
    assert "# not recorded: driver (a CPU run)" in out.read_text()
    (att,) = cal.section("attention")
    assert (att.kernel, att.direction, att.causal, att.runs) == ("fa2", "forward", True, (2,))
