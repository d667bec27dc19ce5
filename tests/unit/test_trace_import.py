"""``willitscale trace import``: Kineto/Chrome traces into steps, compute by kind, collectives and
overlap. The traces here are built by hand so every number has a derivation beside it (times in
microseconds, as the trace writes them); a trace recorded by torch.profiler from a real 2-rank
Gloo DDP step is in tests/distributed/test_trace_ddp.py."""

from __future__ import annotations

import json

import numpy as np
import pytest

from willitscale.cli.main import main
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError
from willitscale.results.importers.kineto import read_trace
from willitscale.results.store import Store

US = 1e-6


def X(name, ts, dur, *, cat="cpu_op", tid=1, **args):
    return {"ph": "X", "cat": cat, "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur,
            "args": args}


CPU_TRACE = {
    "distributedInfo": {"backend": "gloo", "rank": 0, "world_size": 2},
    "host_name": "node0",
    "traceEvents": [
        {"ph": "M", "name": "thread_name", "pid": 1, "tid": 1, "args": {"name": "main"}},
        X("ProfilerStep#1", 0, 1000, cat="user_annotation"),
        X("aten::linear", 100, 300),            # [100, 400]
        X("aten::addmm", 110, 280),             # [110, 390], nested in linear
        X("aten::relu", 400, 50),               # [400, 450]
        X("c10d::allreduce_", 290, 5),          # the launch: not compute
        X("Optimizer.step#AdamW.step", 600, 300, cat="user_annotation"),
        X("aten::add_", 620, 80),               # [620, 700], inside the optimizer step
        X("gloo:all_reduce", 300, 400, cat="user_annotation", tid=2,
          **{"Input Dims": [[1000]], "Input type": ["float"]}),       # [300, 700]
        X("gloo:all_gather", 900, 50, cat="user_annotation", tid=2),  # [900, 950], size unknown
        {"ph": "X", "cat": "cpu_op", "name": "broken", "pid": 1, "tid": 1, "ts": "soon", "dur": 1},
    ],
}


def test_cpu_trace_steps_kinds_collectives_and_overlap():
    s = read_trace(CPU_TRACE, "cpu.json")
    assert (s.backend, s.rank, s.world_size, s.host, s.devices) == ("gloo", 0, 2, "node0", ())
    (step,) = s.steps
    assert step.name == "ProfilerStep#1" and step.duration == pytest.approx(1000 * US)
    # gemm: addmm's 280 + linear's own 300 - 280 = 20 -> 300; relu 50; add_ in the optimizer 80
    assert step.compute == pytest.approx({"gemm": 300 * US, "attention": 0.0,
                                          "elementwise": 50 * US, "optimizer": 80 * US})
    # comms: [300, 700] and [900, 950] -> 450. Compute ran over [100, 450] and [620, 700]:
    # overlap [300, 450] + [620, 700] = 150 + 80 = 230; exposed 450 - 230 = 220
    assert step.comms == pytest.approx(450 * US) and step.overlap == pytest.approx(230 * US)
    assert step.exposed_comms == pytest.approx(220 * US)
    ar, ag = s.collectives
    assert (ar.op, ar.size_bytes, ar.count, ar.dtype, ar.ranks) == (Op.ALL_REDUCE, 4000, 1000, "float32", 2)
    assert ar.duration == pytest.approx(400 * US) and ar.start == pytest.approx(300 * US) and ar.step == 0
    assert ag.op is Op.ALL_GATHER and ag.size_bytes is None  # timed, but no row
    problems = [str(p) for p in s.problems]
    assert any(p.startswith("cpu.json:9: traceEvents[9] (gloo:all_gather)") for p in problems)
    assert any("traceEvents[10]" in p and "numeric 'ts'" in p for p in problems)


def test_gpu_trace_counts_kernels_and_reads_nccl_communication_arguments():
    comm = {"Collective name": "allreduce", "In msg nelems": 1048576, "Out msg nelems": 1048576,
            "dtype": "BFloat16", "Group size": 8, "Process Group Name": "0"}
    gather = {"Collective name": "_allgather_base", "In msg nelems": 1024, "Out msg nelems": 4096,
              "dtype": "Float", "Group size": 4}
    trace = {"deviceProperties": [{"id": 0, "name": "NVIDIA H100 80GB HBM3"}], "traceEvents": [
        X("aten::mm", 0, 500),  # CPU launch side: ignored once kernels are present
        X("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 10, 100, cat="kernel", tid=7),
        X("flash_fwd_kernel", 110, 40, cat="kernel", tid=7),
        X("void at::native::vectorized_elementwise_kernel<4>", 150, 10, cat="kernel", tid=7),
        X("void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor>", 300, 30,
          cat="kernel", tid=7),
        X("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 100, 200,
          cat="kernel", tid=20, **comm),
        X("ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 400, 10,
          cat="kernel", tid=20, **gather),
    ]}
    s = read_trace(trace, "gpu.json")
    (step,) = s.steps
    assert s.devices == ("NVIDIA H100 80GB HBM3",)
    assert step.compute == pytest.approx({"gemm": 100 * US, "attention": 40 * US,
                                          "elementwise": 10 * US, "optimizer": 30 * US})
    ar, ag = s.collectives
    # all_reduce: 2^20 bf16 elements = 2 MiB; all_gather: nccl-tests' size is the output buffer
    assert (ar.op, ar.size_bytes, ar.dtype, ar.ranks, ar.group) == (Op.ALL_REDUCE, 2 * 2**20, "bfloat16", 8, "0")
    assert (ag.op, ag.size_bytes, ag.ranks) == (Op.ALL_GATHER, 4096 * 4, 4)
    # compute kernels [10, 160] and [300, 330]; all_reduce [100, 300]: overlap 60, all_gather
    # [400, 410] none -> comms 210, overlap 60
    assert step.comms == pytest.approx(210 * US) and step.overlap == pytest.approx(60 * US)


@pytest.mark.parametrize("content, expected", [
    ("not json", "JSON"),
    ('{"events": []}', "'traceEvents' list"),
    ('{"traceEvents": [{"ph": "M", "name": "x"}]}', "it has none"),
])
def test_malformed_files_name_the_file_and_what_was_expected(tmp_path, monkeypatch, capsys,
                                                             content, expected):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path))
    path = tmp_path / "bad.json"
    path.write_text(content)
    assert main(["trace", "import", str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and expected in err


def test_import_stores_sized_collectives_once_and_calibrate_reads_them(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path))
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(CPU_TRACE))
    assert main(["trace", "import", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (trace,) = out["traces"]
    (stored,) = trace["stored"]
    assert stored["ranks"] == 2 and stored["rows"] == 1
    with Store() as store:
        run = store.run(stored["run"])
        assert run.info.kind == "collectives" and run.info.source.startswith("torch.profiler trace cpu.json")
        (row,) = run.rows
        assert row["op"] == "all_reduce" and row["size_bytes"] == 4000 and row["time_us"] == pytest.approx(400)
        assert run.info.options["trace"]["steps"][0]["exposed_comms_s"] == pytest.approx(220 * US)
    assert main(["trace", "import", str(path), "--json"]) == 0  # the same file again: not stored
    again = json.loads(capsys.readouterr().out)["traces"][0]["stored"][0]
    assert again["run"] is None and again["skipped"] == f"already imported as run {stored['run']}"


def test_no_store_prints_without_storing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path))
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(CPU_TRACE))
    assert main(["trace", "import", str(path), "--no-store"]) == 0
    out = capsys.readouterr().out
    assert "ProfilerStep#1" in out and "all_reduce" in out
    assert not (tmp_path / "results.sqlite").exists()


def test_bad_trace_json_is_an_error_not_a_traceback():
    with pytest.raises(ConfigError, match="traceEvents"):
        read_trace({"nothing": 1}, "x.json")


def test_import_store_export_import_gives_the_same_rows(tmp_path, monkeypatch, capsys):
    # Must 3: import -> store -> export -> import gives the same rows
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "a"))
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(CPU_TRACE))
    assert main(["trace", "import", str(path)]) == 0
    exported = tmp_path / "runs.json"
    assert main(["results", "export", "--format", "json", "-o", str(exported)]) == 0
    with Store() as store:
        before = store.run(1)
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "b"))
    assert main(["results", "import", str(exported)]) == 0
    with Store() as store:
        after = store.run(1)
    assert [dict(r) for r in after.rows] == [dict(r) for r in before.rows]
    assert after.info.source == before.info.source
    assert dict(after.info.options) == dict(before.info.options)
    capsys.readouterr()


def test_compare_puts_the_traced_step_beside_the_estimate(tmp_path, monkeypatch, capsys):
    from willitscale.estimation.estimate import estimate
    from willitscale.scenario.build import build_scenario

    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path))
    path = tmp_path / "cpu.json"
    path.write_text(json.dumps(CPU_TRACE))
    flags = ["--model", "gpt2-xl", "--preset", "dgx-h100", "--nodes", "1", "--micro-batch", "4"]
    assert main(["trace", "compare", str(path), *flags, "--json"]) == 0
    rows = {r["what"]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    # measured, from CPU_TRACE's one step (see the first test): step 1000, compute 300 + 50,
    # optimizer 80, comms 450, exposed 220 (microseconds)
    assert {k: rows[k]["measured_s"] / US for k in rows} == pytest.approx(
        {"step": 1000, "compute (forward + backward)": 350, "optimizer": 80,
         "communication (busy)": 450, "exposed communication": 220})
    e = estimate(build_scenario({"model": "gpt2-xl", "preset": "dgx-h100", "nodes": 1,
                                 "micro_batch": 4}), allow_oom=True)
    assert rows["step"]["predicted_s"] == e.step_time
    assert rows["compute (forward + backward)"]["predicted_s"] == e.breakdown.forward + e.breakdown.backward
    assert rows["exposed communication"]["predicted_s"] == e.exposed_comms
    assert rows["optimizer"]["error"] == pytest.approx((e.breakdown.optimizer - 80 * US) / (80 * US))


@pytest.mark.parametrize("settings", [
    {"model": "gpt2-xl", "preset": "dgx-h100", "nodes": 2, "micro_batch": 4},
    {"model": "llama3-8b", "gpu": "h100", "nodes": 2, "gpus_per_node": 8, "seq_len": 4096,
     "micro_batch": 1, "tp": 2, "pp": 2},
])
def test_a_predicted_trace_in_kinetos_names_reads_back_as_the_estimate(settings, tmp_path):
    from willitscale.estimation.estimate import estimate
    from willitscale.report.trace import write_chrome_trace
    from willitscale.scenario.build import build_scenario

    est = estimate(build_scenario(settings), allow_oom=True)
    path = write_chrome_trace(est.timeline, tmp_path / "predicted.json", steps=2, names="kineto",
                              world_size=est.gpus)
    s = read_trace(json.loads(path.read_text()), str(path))
    assert [st.name for st in s.steps] == ["ProfilerStep#0", "ProfilerStep#1"]
    assert s.world_size == est.gpus and s.backend == "nccl"
    comm_spans = [sp for sp in est.timeline.spans if sp.lane == "comms"]
    assert len(s.collectives) == 2 * len(comm_spans)  # every communication span, each step
    for step in s.steps:
        assert step.duration == pytest.approx(est.step_time)
        # compute kernels: forward + backward (+ their overlap slowdown) and the optimizer
        busy = est.timeline.busy("compute")
        assert sum(step.compute.values()) == pytest.approx(busy)
        assert step.compute["optimizer"] == pytest.approx(est.breakdown.optimizer)
        # exposed communication: the time some communication span covers and no compute span
        # does, measured here on the estimate's own spans on a 1 ns grid
        grid = np.arange(0.0, est.step_time, 1e-9 * max(1.0, est.step_time / 1e-3))
        def covered(spans):
            mask = np.zeros(grid.size, dtype=bool)
            for sp in spans:
                mask |= (grid >= sp.start) & (grid < sp.end)
            return mask
        comm, compute = covered(comm_spans), covered(est.timeline.lane("compute"))
        dt = grid[1] - grid[0]
        assert step.comms == pytest.approx(comm.sum() * dt, rel=1e-3)
        assert step.exposed_comms == pytest.approx((comm & ~compute).sum() * dt, rel=1e-3, abs=2 * dt)
