"""NCCL's point-to-point ops end to end: an nccl-tests ``sendrecv_perf`` / ``alltoall_perf`` log
of a planted line -> ``results import-nccl-tests`` -> ``calibrate`` -> a ``[[collective]]`` entry
labelled ``P2P`` / ``LL/Simple`` that recovers the line within 1% -> the estimate's pipeline sends
and expert all-to-alls timed by it.

The logs are written with nccl-tests' own format strings (github.com/NVIDIA/nccl-tests a0b82b2,
src/util.cu: ``writeBenchmarkLinePreamble`` "%12li  %12li  %8s  %6s  %6s",
``writeBenchmarkLineBody`` "  %7s  %6s  %6s  %6g" with ``getFloatStr``), as
tests/unit/test_nccl_tests_import.py writes its all_reduce log; busbw is algbw x 1 for sendrecv
and x (n-1)/n for alltoall (nccl-tests doc/PERFORMANCE.md).
"""

from __future__ import annotations

import json

import pytest

SIZES = [2**k for k in range(3, 31)]  # 8 B to 1 GiB, -f 2


def _float(value: float, width: int) -> str:
    """nccl-tests' getFloatStr (util.cu): %.2f, else %.1f, else %.0f, else an exponent."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        if len(fmt % value) <= width:
            return fmt % value
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % value


def nccl_tests_log(program: str, hosts: list[str], latency: float, bandwidth: float) -> str:
    """A ``program`` log (one rank per entry of ``hosts``) whose every row takes ``latency +
    size / bandwidth``."""
    n = len(hosts)
    factor = 1.0 if program == "sendrecv_perf" else (n - 1) / n
    lines = ["# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703",
             f"# Collective test starting: {program}",
             "# nThread 1 nGpus 1 minBytes %d maxBytes %d step: 2(factor) warmup iters: 5 iters: 20 "
             "agg iters: 1 validation: 1 graph: 0 unalign: 0" % (min(SIZES), max(SIZES)), "#",
             "# Using devices"]
    local: dict[str, int] = {}
    for rank, host in enumerate(hosts):
        device = local.setdefault(host, 0)
        local[host] += 1
        lines.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s" % (
            rank, 0, 40000 + rank, host, device, 0, 0x18 + 16 * device, 0, "NVIDIA H100 80GB HBM3"))
    lines += ["#", "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s" % (
        "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
        "algbw", "busbw", "#wrong")]
    busbws = []
    for size in SIZES:
        line = "%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "%6i" % -1)
        for _ in ("out-of-place", "in-place"):
            t = latency + size / bandwidth
            algbw = size / 1e9 / t
            busbws.append(algbw * factor)
            line += "  %7s  %6s  %6s  %6g" % (_float(t * 1e6, 7), _float(algbw, 6),
                                              _float(algbw * factor, 6), 0)
        lines.append(line)
    lines += ["# %-20s : %d %s" % ("Out of bounds values", 0, "OK"),
              "# %-20s : %g %s" % ("Avg bus bandwidth", sum(busbws) / len(busbws), ""), "#",
              f"# Collective test concluded: {program}", ""]
    return "\n".join(lines)


def _entries_only(path) -> str:
    """The calibration at ``path`` with its [[collective]] entries alone. A sweep's [[link]] fit
    is the same latency + size / bandwidth line here (one send, or one all-to-all, per row), so
    with it the estimate's alpha-beta form would give the same time whether or not the entry
    was read: without it, NCCL's own lines run and only the entry can move them."""
    from willitscale.hardware.calibration import Calibration, load_calibration

    out = path.replace(".toml", "-entries.toml")
    entries = load_calibration(path).section("collective")
    with open(out, "w") as f:
        f.write(Calibration(links=(), compute=(), sections={"collective": entries}).to_toml())
    return out


def _calibrated(cli, tmp_path, program, hosts, latency, bandwidth):
    """Import the log, calibrate it to a file: (the file, its one [[collective]] entry)."""
    log = tmp_path / f"{program}.log"
    log.write_text(nccl_tests_log(program, hosts, latency, bandwidth))
    code, out, err = cli("results", "import-nccl-tests", str(log), "--json")
    assert code == 0, err
    (run,) = json.loads(out)["runs"]
    path = tmp_path / "cal.toml"
    code, out, err = cli("calibrate", str(run["id"]), "--json", "--output", str(path))
    assert code == 0, err
    (entry,) = json.loads(out)["collective"]
    return str(path), entry


def test_a_sendrecv_log_gives_a_p2p_entry_that_times_the_pipeline_sends(cli, tmp_path):
    # planted: 2 nodes x 1 GPU, send/recv of S bytes takes 40 us + S / 12 GB/s
    latency, bandwidth = 40e-6, 12e9
    path, entry = _calibrated(cli, tmp_path, "sendrecv_perf", ["node-001", "node-002"], latency, bandwidth)
    assert (entry["backend"], entry["op"], entry["algorithm"], entry["protocol"]) == (
        "nccl", "send_recv", "P2P", "LL/Simple")
    assert (entry["nodes"], entry["ranks_per_node"]) == (2, 1)
    assert entry["latency_us"] == pytest.approx(latency * 1e6, rel=0.01)
    assert entry["algbw_GBps"] == pytest.approx(bandwidth / 1e9, rel=0.01)
    # validate predicts the sweep's rows by the entry (in-sample), and says so
    code, out, err = cli("validate", "--calibration", path, "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert len(rows) == 2 * len(SIZES) and all(r["in_sample"] for r in rows)
    assert {r["predicted_by"] for r in rows} == {"[[collective]] nccl send_recv P2P (LL/Simple) on 2 x 1 (runs 1)"}
    assert max(abs(r["error"]) for r in rows) < 0.01
    flags = ["estimate", "--model", "gpt2", "--gpu", "a100-80gb", "--nodes", "2", "--gpus-per-node",
             "1", "--pp", "2", "--micro-batch", "4", "--seq-len", "1024", "--no-overlap", "--json"]
    code, out, err = cli(*flags)
    assert code == 0, err
    (plain,) = [o for o in json.loads(out)["comm_ops"] if o["op"] == "send_recv"]
    code, out, err = cli(*flags, "--calibration", _entries_only(path))
    assert code == 0, err
    d = json.loads(out)
    (sends,) = [o for o in d["comm_ops"] if o["op"] == "send_recv"]
    # one micro-batch crosses the one stage boundary: 4 x 1024 tokens x 768 (gpt2's hidden) x
    # 2 B = 6,291,456 B, one call, on the critical path (docs: step/pipeline.py)
    message = 4 * 1024 * 768 * 2
    assert (sends["size_bytes"], sends["calls"]) == (message, 1)
    fitted = entry["latency_us"] * 1e-6 + message / (entry["algbw_GBps"] * 1e9)
    assert sends["time_s"] == pytest.approx(fitted, rel=1e-9)
    # = 40 us + 524.3 us = 564.3 us planted (the model's own time differs by far more than 1%)
    assert sends["time_s"] == pytest.approx(latency + message / bandwidth, rel=0.01)
    assert abs(plain["time_s"] / sends["time_s"] - 1) > 0.2
    notes = [a["value"] for a in d["assumptions"] if a["what"] == "measured collective"]
    assert any("send_recv P2P (LL/Simple) on 2 node(s) x 1 rank(s)" in n for n in notes)
    # the whole calibration (its [[link]] fit too: NCCL on fitted alpha-beta levels, where the
    # entry is the one measured candidate) gives the same time
    code, out, err = cli(*flags, "--calibration", path)
    assert code == 0, err
    (both,) = [o for o in json.loads(out)["comm_ops"] if o["op"] == "send_recv"]
    assert both["time_s"] == pytest.approx(fitted, rel=1e-9)


def test_an_alltoall_log_gives_a_p2p_entry_that_times_the_expert_all_to_alls(cli, tmp_path):
    # planted: 1 node x 8 GPUs, an all-to-all of an S-byte buffer takes 30 us + S / 150 GB/s
    latency, bandwidth = 30e-6, 150e9
    path, entry = _calibrated(cli, tmp_path, "alltoall_perf", ["node-001"] * 8, latency, bandwidth)
    assert (entry["op"], entry["algorithm"], entry["protocol"], entry["nodes"], entry["ranks_per_node"]) == (
        "all_to_all", "P2P", "LL/Simple", 1, 8)
    assert entry["latency_us"] == pytest.approx(latency * 1e6, rel=0.01)
    assert entry["algbw_GBps"] == pytest.approx(bandwidth / 1e9, rel=0.01)
    flags = ["estimate", "--model", "mixtral-8x7b", "--gpu", "h100-80gb", "--nodes", "2",
             "--gpus-per-node", "8", "--ep", "8", "--zero", "3", "--recompute", "full",
             "--micro-batch", "1", "--seq-len", "1024", "--no-overlap", "--json"]
    code, out, err = cli(*flags)
    assert code == 0, err
    (plain,) = [o for o in json.loads(out)["comm_ops"] if o["op"] == "all_to_all"]
    code, out, err = cli(*flags, "--calibration", _entries_only(path))
    assert code == 0, err
    (a2a,) = [o for o in json.loads(out)["comm_ops"] if o["op"] == "all_to_all"]
    # the 8 expert ranks share a node (ranks tp-cp-ep-dp-pp, innermost first). One all-to-all
    # carries 1024 tokens x top_k 2 x 4096 (hidden) x 2 B = 16 MiB; per micro-batch and MoE
    # layer 2 forward + 4 backward with full recompute, 32 layers: 192 calls (step/expert.py)
    size = 1024 * 2 * 4096 * 2
    assert (a2a["calls"], a2a["size_bytes"]) == (192, 192 * size)
    fitted = entry["latency_us"] * 1e-6 + size / (entry["algbw_GBps"] * 1e9)
    assert a2a["time_s"] == pytest.approx(192 * fitted, rel=1e-9)
    # 192 x (30 us + 111.8 us) = 27.2 ms planted; the model's own time differs by far more than 1%
    assert a2a["time_s"] == pytest.approx(192 * (latency + size / bandwidth), rel=0.01)
    assert abs(plain["time_s"] / a2a["time_s"] - 1) > 0.2


def test_collective_takes_the_p2p_entry_for_nccls_point_to_point_candidate(cli, tmp_path):
    # the same entry in `collective --calibration`: NCCL's one candidate for all_to_all is its
    # point-to-point sends (P2P/Simple in the model), which the entry times: 30 us + 64 MiB /
    # 150 GB/s = 30 us + 447.4 us
    latency, bandwidth = 30e-6, 150e9
    path, entry = _calibrated(cli, tmp_path, "alltoall_perf", ["node-001"] * 8, latency, bandwidth)
    code, out, err = cli("collective", "all_to_all", "--size", "64MiB", "--ranks", "8", "--node",
                         "dgx-h100", "--calibration", _entries_only(path), "--json")
    assert code == 0, err
    d = json.loads(out)
    fitted = entry["latency_us"] * 1e-6 + 2**26 / (entry["algbw_GBps"] * 1e9)
    assert d["time_s"] == pytest.approx(fitted, rel=1e-9)
    assert any("P2P (LL/Simple): measured time" in a for a in d["assumptions"])


def test_a_p2p_entry_times_the_context_parallel_ring_passes_on_its_geometry(tmp_path):
    # the engine's context-parallel lines are send_recv over the cp groups (step/evaluate.py);
    # a cp group of 2 inside an 8-GPU node is 1 x 2: an entry measured there times its passes,
    # 12 us + S / 80 GB/s; a cp group of 4 (1 x 4) keeps NCCL's own P2P model
    import numpy as np

    from willitscale.collectives.lines import cluster_links, collective_lines, line_time
    from willitscale.hardware.calibration import Calibration
    from willitscale.hardware.profile_collective import CollectiveCurve
    from willitscale.scenario.build import build_scenario
    from willitscale.topology.placement import group_placement

    entry = CollectiveCurve(backend="nccl", op="send_recv", algorithm="P2P", protocol="LL/Simple", nodes=1,
                            ranks_per_node=2, latency=12e-6, bandwidth=80e9, min_size=8, max_size=2**30)
    path = tmp_path / "cp.toml"
    path.write_text(Calibration(links=(), compute=(), sections={"collective": (entry,)}).to_toml())

    def passes(cp, calibration):
        scenario = build_scenario({"model": "llama3-8b", "gpu": "h100-80gb", "nodes": 1, "gpus_per_node": 8,
                                   "seq_len": 8192, **({"calibration": str(calibration)} if calibration else {})})
        links = cluster_links(scenario)
        assert links.backend == "nccl"  # no [[link]] level: NCCL's lines, the entry in them
        place = group_placement("cp", {"tp": 1, "cp": cp, "ep": 1, "dp": 8 // cp, "pp": 1}, 8)
        return float(np.ravel(line_time(collective_lines("send_recv", place, links), np.array([4.0 * 2**20])))[0])

    assert passes(2, path) == pytest.approx(12e-6 + 4 * 2**20 / 80e9, rel=1e-12)
    assert passes(2, None) != pytest.approx(passes(2, path), rel=0.01)
    assert passes(4, path) == passes(4, None)
