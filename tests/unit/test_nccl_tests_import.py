"""nccl-tests output into the store, and out of `bench collectives --format nccl-tests`.

The generated logs below are written with nccl-tests' own format strings, copied from
github.com/NVIDIA/nccl-tests at a0b82b2 (src/util.cu: ``writeDeviceReport``,
``writeResultHeader``, ``writeBenchmarkLinePreamble`` "%12li  %12li  %8s  %6s  %6s",
``writeBenchmarkLineBody`` "  %7s  %6s  %6s  %6g" with ``getFloatStr``, ``writeResultFooter``;
the JSON keys of its ``json*`` calls), independently of willitscale's writer. The published
logs are in tests/data/nccl-tests (README.md there gives each one's source).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parents[1] / "data" / "nccl-tests"

# the planted link: ring all_reduce over n ranks takes 2(n-1) alpha + 2(n-1)/n S / B
ALPHA = 3.0e-6  # seconds per ring step
BANDWIDTH = 150e9  # bytes/s, one direction
RANKS = 8


def get_float_str(value: float, width: int) -> str:
    """nccl-tests' getFloatStr (util.cu): %.2f, else %.1f, else %.0f, else an exponent."""
    for fmt in (f"%{width}.2f", f"%{width}.1f", f"%{width}.0f"):
        if len(fmt % value) <= width:
            return fmt % value
    return (f"%{width}.1e" if width >= 7 else f"%{width}.0e") % value


def ring_time(size: float, n: int = RANKS) -> float:
    return 2 * (n - 1) * ALPHA + 2 * (n - 1) / n * size / BANDWIDTH


def nccl_tests_log(sizes, *, noise: bool = True) -> str:
    """An 8-GPU, one-process (-g 8) all_reduce_perf log of the planted link, as nccl-tests
    2.19.6 prints it, with NCCL_DEBUG=INFO lines among its lines when ``noise``."""
    n = RANKS
    lines = ["# nccl-tests version 2.19.6 nccl-headers=22703 nccl-library=22703",
             "# Collective test starting: all_reduce_perf",
             "# nThread 1 nGpus 8 minBytes %ld maxBytes %ld step: %ld(%s) warmup iters: %d iters: "
             "%d agg iters: %d validation: %d graph: %d unalign: %d" % (
                 min(sizes), max(sizes), 2, "factor", 5, 20, 1, 1, 0, 0), "#", "# Using devices"]
    for i in range(n):
        lines.append("#  Rank %2d Group %2d Pid %6d on %10s device %2d [%04x:%02x:%02x] %s" % (
            i, 0, 43210, "node-001", i, 0, 0x18 + 16 * i, 0, "NVIDIA H100 80GB HBM3"))
    lines.append("#")
    if noise:
        lines += ["node-001:43210:43210 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>",
                  "node-001:43210:43210 [0] NCCL INFO NCCL version 2.27.3+cuda12.9"]
    lines += [
        "#",
        "# %10s  %12s  %8s  %6s  %6s           out-of-place                       in-place          "
        % ("", "", "", "", ""),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s" % (
            "size", "count", "type", "redop", "root", "time", "algbw", "busbw", "#wrong", "time",
            "algbw", "busbw", "#wrong", 0, ""),
        "# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s  %7s  %6s  %6s  %6s %*s" % (
            "(B)", "(elements)", "", "", "", "(us)", "(GB/s)", "(GB/s)", "", "(us)", "(GB/s)",
            "(GB/s)", "", 0, "")]
    busbws = []
    for i, size in enumerate(sizes):
        line = "%12li  %12li  %8s  %6s  %6s" % (size, size // 4, "float", "sum", "%6i" % -1)
        for _ in ("out-of-place", "in-place"):
            t = ring_time(size)
            algbw = size / 1e9 / t
            busbw = algbw * 2 * (n - 1) / n
            busbws.append(busbw)
            line += "  %7s  %6s  %6s  %6g" % (get_float_str(t * 1e6, 7), get_float_str(algbw, 6),
                                              get_float_str(busbw, 6), 0)
        lines.append(line)
        if noise and i == 3:
            lines.append("node-001:43210:43217 [3] NCCL INFO Channel 00/32 : 0 1 2 3 4 5 6 7")
    lines += ["# %-20s : %d %s" % ("Out of bounds values", 0, "OK"),
              "# %-20s : %g %s" % ("Avg bus bandwidth", sum(busbws) / len(busbws), ""), "#",
              "# Collective test concluded: all_reduce_perf", ""]
    return "\n".join(lines)


SIZES = [2**k for k in range(3, 31)]  # 8 B to 1 GiB, -f 2


def test_a_generated_log_imported_calibrated_and_validated_recovers_the_planted_link(tmp_path, cli):
    # the acceptance: latency and bandwidth back within 1%
    log = tmp_path / "all_reduce.log"
    log.write_text(nccl_tests_log(SIZES))
    code, out, err = cli("results", "import-nccl-tests", str(log), "--json")
    assert code == 0, err
    (run,) = json.loads(out)["runs"]
    assert (run["op"], run["ranks"], run["nodes"], run["rows"]) == ("all_reduce", 8, 1, 2 * len(SIZES))
    code, out, err = cli("calibrate", str(run["id"]), "--json")
    assert code == 0, err
    (link,) = json.loads(out)["links"]
    assert link["level"] == "intra_node" and link["backend"] == "nccl"
    assert link["latency_us"] == pytest.approx(ALPHA * 1e6, rel=0.01)
    assert link["bandwidth_GBps"] == pytest.approx(BANDWIDTH / 1e9, rel=0.01)
    code, out, err = cli("validate", "--json")
    assert code == 0, err
    rows = json.loads(out)["rows"]
    assert len(rows) == 2 * len(SIZES)
    assert max(abs(r["error"]) for r in rows) < 0.01


def test_the_stored_run_carries_the_log_header(tmp_path, cli):
    log = tmp_path / "all_reduce.log"
    log.write_text(nccl_tests_log(SIZES[:6]))
    assert cli("results", "import-nccl-tests", str(log))[0] == 0
    shown = json.loads(cli("results", "show", "--json")[1])
    env = shown["environment"]
    assert (env["world_size"], env["nodes"], env["ranks_per_node"], env["backend"]) == (8, 1, 8, "nccl")
    assert env["devices"] == ["NVIDIA H100 80GB HBM3"]
    assert env["nccl"] == "2.27.3+cuda12.9"  # the NCCL_DEBUG=INFO version line
    assert env["imported"]["program"] == "all_reduce_perf"
    assert shown["status"] == "complete" and shown["source"].startswith("nccl-tests text all_reduce.log")
    # the first row as printed: 8 B in (2*7*3 + 2*7/8*8/150e3) us = 42.00 us
    first = shown["results"][0]
    assert (first["size_bytes"], first["in_place"], first["time_us"]) == (8, False, 42.0)


def test_a_log_imported_twice_is_stored_once(tmp_path, cli):
    log = tmp_path / "a.log"
    log.write_text(nccl_tests_log(SIZES[:4]))
    assert cli("results", "import-nccl-tests", str(log))[0] == 0
    code, out, err = cli("results", "import-nccl-tests", str(log), "--json")
    assert code == 0 and json.loads(out)["runs"][0]["skipped"] == "already imported as run 1"
    assert len(json.loads(cli("results", "list", "--json")[1])) == 1


def test_a_published_two_node_log_with_header_and_footer(cli):
    # GCP A3 Mega, 2 x 8 H100 (README.md): 16 '#  Rank' lines on two hosts, 31 sizes
    code, out, err = cli("results", "import-nccl-tests", str(DATA / "gcp_a3mega_2node_ztan.log"),
                         "--json")
    assert code == 0, err
    (run,) = json.loads(out)["runs"]
    assert (run["ranks"], run["nodes"], run["rows"], run["status"]) == (16, 2, 62, "complete")
    # the footer's 70.742 GB/s is the mean of the 62 printed busbw: no note that rows are missing
    assert not any("footer" in n for n in json.loads(out)["notes"])
    shown = json.loads(cli("results", "show", "--json")[1])
    env = shown["environment"]
    assert env["ranks_per_node"] == 8 and [h["node"] for h in env["hosts"]] == [
        "ztan-mig-235z", "ztan-mig-gq73"]
    last = shown["results"][-1]  # "8589934592 ... 47743  179.92  337.35  0" (in-place)
    assert (last["size_bytes"], last["in_place"], last["time_us"], last["wrong"]) == (
        8589934592, True, 47743.0, 0)
    assert last["busbw_GBps"] == pytest.approx(337.35, abs=0.01)


def test_header_lines_that_lost_their_hash_in_markdown(tmp_path, cli):
    # pasted into Markdown, '# Using devices' becomes a heading and loses its '#'
    text = (DATA / "gcp_a3mega_2node_ztan.log").read_text()
    stripped = "\n".join(line[2:] if line.startswith("# ") else line for line in text.splitlines())
    log = tmp_path / "pasted.log"
    log.write_text(stripped)
    code, out, err = cli("results", "import-nccl-tests", str(log), "--op", "all_reduce", "--json")
    assert code == 0, err
    (run,) = json.loads(out)["runs"]
    assert (run["ranks"], run["nodes"], run["rows"]) == (16, 2, 62)


@pytest.mark.parametrize("name, ranks, rows, checked", [
    # sweeps.toml (research): aws-p5-2n 16 ranks (srun -l '0:' prefixes), deepops 16 (old
    # 'error' column, no root column), gcp-a3high 8 ('N/A' #wrong)
    ("aws_p5_2node.txt", 16, 64, True),
    ("deepops_dgxa100_2node_k8s_ring.txt", 16, 60, False),
    ("gcp_a3high_1node.txt", 8, 8, False),
])
def test_published_tables_without_header_take_ranks_from_busbw(cli, name, ranks, rows, checked):
    code, out, err = cli("results", "import-nccl-tests", str(DATA / name), "--op", "all_reduce",
                         "--nodes", "2" if ranks == 16 else "1", "--json")
    assert code == 0, err
    (run,) = json.loads(out)["runs"]
    assert (run["ranks"], run["rows"]) == (ranks, rows)
    stored = json.loads(cli("results", "show", "--json")[1])["results"]
    assert {r["checked"] for r in stored} == {checked}


def test_a_cut_line_is_reported_and_the_rows_before_it_kept(cli):
    # nccl issue 439's paste: old layout, an NCCL INFO line inside the table, the last line cut
    code, out, err = cli("results", "import-nccl-tests", str(DATA / "nccl_issue439_excerpt.log"),
                         "--op", "all_reduce", "--ranks", "2", "--nodes", "1", "--json")
    assert code == 1
    report = json.loads(out)
    (problem,) = report["problems"]
    assert problem.startswith(f"{DATA / 'nccl_issue439_excerpt.log'}:13: ")
    assert "7 columns; expected size, count, type, redop" in problem
    assert report["runs"][0]["rows"] == 14  # the 7 lines before it, both halves


def test_without_op_or_ranks_the_message_says_which_flag(cli):
    code, out, err = cli("results", "import-nccl-tests", str(DATA / "nccl_issue439_excerpt.log"))
    assert code == 1
    assert "nccl_issue439_excerpt.log:3: which collective is this?" in err and "--op" in err
    code, out, err = cli("results", "import-nccl-tests", str(DATA / "nccl_issue439_excerpt.log"),
                         "--op", "all_reduce", "--nodes", "1")
    assert code == 1 and "how many ranks?" in err and "--ranks N" in err


def test_refused_sections_and_wrong_flags(tmp_path, cli):
    log = tmp_path / "gather.log"
    log.write_text(nccl_tests_log(SIZES[:3]).replace("all_reduce_perf", "gather_perf"))
    code, out, err = cli("results", "import-nccl-tests", str(log))
    assert code == 1 and "gather_perf measures gather, which willitscale does not model" in err
    log.write_text(nccl_tests_log(SIZES[:3]).replace("Group  0 Pid  43210 on   node-001 device  4",
                                                     "Group  1 Pid  43210 on   node-001 device  4"))
    code, out, err = cli("results", "import-nccl-tests", str(log))
    assert code == 1 and "NCCL_TESTS_SPLIT" in err
    log.write_text(nccl_tests_log(SIZES[:3]))
    code, out, err = cli("results", "import-nccl-tests", str(log), "--ranks", "4")
    assert code == 1 and "the log lists 8 ranks but --ranks is 4" in err


def test_a_row_whose_bandwidths_disagree_is_left_out(tmp_path, cli):
    text = nccl_tests_log(SIZES[-3:], noise=False)
    lines = text.splitlines()
    row = next(i for i, line in enumerate(lines) if line.lstrip().startswith("268435456"))
    parts = lines[row].split()
    parts[6] = "999.99"  # out-of-place algbw no longer size / time
    lines[row] = "  ".join(parts)
    log = tmp_path / "bad.log"
    log.write_text("\n".join(lines))
    code, out, err = cli("results", "import-nccl-tests", str(log), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["runs"][0]["rows"] == 5
    assert "out-of-place half left out: size / time" in report["problems"][0]


def test_export_and_import_give_the_same_rows(tmp_path, cli, monkeypatch):
    # Must 3: import -> store -> export -> import gives the same rows
    log = tmp_path / "a.log"
    log.write_text(nccl_tests_log(SIZES[:5]))
    assert cli("results", "import-nccl-tests", str(log))[0] == 0
    exported = tmp_path / "runs.json"
    assert cli("results", "export", "--format", "json", "-o", str(exported))[0] == 0
    before = json.loads(cli("results", "show", "1", "--json")[1])
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "other-home"))
    assert cli("results", "import", str(exported))[0] == 0
    after = json.loads(cli("results", "show", "1", "--json")[1])
    assert after["results"] == before["results"]
    assert after["source"] == before["source"] and after["environment"] == before["environment"]


# -- JSON (-J) -----------------------------------------------------------------------------

def nccl_tests_json(sizes) -> str:
    """The planted link as nccl-tests' -J file (util.cu's json* calls: keys and nesting; the
    writer puts no spaces or newlines)."""
    results = []
    for size in sizes:
        t = ring_time(size)
        algbw = size / 1e9 / t
        half = {"time": t * 1e6, "alg_bw": algbw, "bus_bw": algbw * 2 * 7 / 8, "nwrong": 0.0}
        results.append({"size": size, "count": size // 4, "type": "float", "redop": "sum",
                        "root": "%6i" % -1, "out_of_place": half, "in_place": half,
                        "actual_iterations": 20, "experiment_name": ""})
    doc = {"version": 3, "start_time": "2026-07-09 16:03:21",
           "args": ["./build/all_reduce_perf", "-b", "8", "-e", "1G", "-f", "2", "-g", "8",
                    "-J", "out.json"], "env": ["NCCL_DEBUG=WARN"], "nccl_version": 22703,
           "config": {"nthreads": 1, "ngpus": 8, "minimum_bytes": min(sizes),
                      "maximum_bytes": max(sizes), "step_factor": 2, "warmup_iters": 5,
                      "iterations": 20, "aggregated_iterations": 1, "validation": 1, "graph": 0,
                      "blocking_collectives": "false", "per_iter_timing": "false",
                      "per_iter_skip": 0, "parallel_init": "false",
                      "devices": [{"rank": i, "group": 0, "pid": 43210, "hostname": "node-001",
                                   "device": i, "device_hex": "0000:18:00",
                                   "device_info": "NVIDIA H100 80GB HBM3"} for i in range(8)]},
           "results": results, "out_of_bounds": {"count": 0, "okay": "true"},
           "average_bus_bandwidth": {"bandwidth": 100.0, "okay": "unchecked"}, "errors": [],
           "end_time": "2026-07-09 16:03:40"}
    return json.dumps(doc, separators=(",", ":"))


def test_json_output_recovers_the_planted_link(tmp_path, cli):
    path = tmp_path / "out.json"
    path.write_text(nccl_tests_json(SIZES))
    code, out, err = cli("results", "import-nccl-tests", str(path), "--json")
    assert code == 0, err
    (run,) = json.loads(out)["runs"]
    assert (run["op"], run["ranks"], run["nodes"], run["rows"]) == ("all_reduce", 8, 1, 2 * len(SIZES))
    shown = json.loads(cli("results", "show", "--json")[1])
    assert shown["started_at"] == "2026-07-09T16:03:21" and shown["environment"]["nccl"] == "2.27.3"
    (link,) = json.loads(cli("calibrate", "--json")[1])["links"]
    assert link["latency_us"] == pytest.approx(ALPHA * 1e6, rel=0.01)
    assert link["bandwidth_GBps"] == pytest.approx(BANDWIDTH / 1e9, rel=0.01)


def test_a_cut_json_file_keeps_the_results_before_the_cut(tmp_path, cli):
    text = nccl_tests_json(SIZES[:6])
    cut = text.index('{"size":128')  # the 5th result (8, 16, 32, 64 come before it)
    path = tmp_path / "killed.json"
    path.write_text(text[:cut + 40])
    code, out, err = cli("results", "import-nccl-tests", str(path), "--json")
    assert code == 1
    report = json.loads(out)
    assert report["runs"][0]["rows"] == 8 and report["runs"][0]["status"] == "interrupted"
    assert "result 5 (character" in report["problems"][0]
    assert "the 4 results before it were read" in report["problems"][0]


def test_a_file_that_is_not_nccl_tests_output(tmp_path, cli):
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}')
    code, out, err = cli("results", "import-nccl-tests", str(path))
    assert code == 1 and f"{path}:1: not nccl-tests JSON output" in err
    path = tmp_path / "x.log"
    path.write_text("hello\nworld\n")
    code, out, err = cli("results", "import-nccl-tests", str(path))
    assert code == 1 and "no nccl-tests table in this file" in err


# -- bench collectives --format nccl-tests ---------------------------------------------------

def test_the_layout_is_nccl_tests_and_reads_back(tmp_path, cli):
    from willitscale.collectives.ops import Op
    from willitscale.report.nccl_tests import nccl_tests_text
    from willitscale.results.records import CollectiveRow

    rows = [CollectiveRow(op=Op.ALL_REDUCE, size_bytes=s, count=s // 4, dtype="float32",
                          redop="sum", root=-1, in_place=p, ranks=2, time=ring_time(s, 2), wrong=0)
            for s in (1024, 1048576) for p in (False, True)]
    env = {"backend": "gloo", "hosts": [{"node": "h", "hostname": "h", "gpus": []}],
           "ranks": [{"rank": 0, "node": "h", "local_rank": 0, "device": "cpu", "pid": 11},
                     {"rank": 1, "node": "h", "local_rank": 1, "device": "cpu", "pid": 12}]}
    options = {"min_bytes": 1024, "max_bytes": 1048576, "factor": 1024.0, "warmup": 5,
               "iters": 20, "check": True}
    text = nccl_tests_text([r.to_json() for r in rows], options=options, environment=env)
    line = next(x for x in text.splitlines() if x.lstrip().startswith("1048576"))
    t = ring_time(1048576, 2)
    half = "  %7s  %6s  %6s  %6g" % (get_float_str(t * 1e6, 7), get_float_str(1048576 / t / 1e9, 6),
                                     get_float_str(1048576 / t / 1e9, 6), 0)
    assert line == "%12li  %12li  %8s  %6s  %6s" % (1048576, 262144, "float", "sum", "    -1") + half * 2
    assert "# nThread 1 nGpus 1 minBytes 1024 maxBytes 1048576 step: 1024(factor)" in text
    assert "#  Rank  1 Group  0 Pid     12 on          h device  1 [cpu] cpu" in text
    log = tmp_path / "ours.log"
    log.write_text(text)
    code, out, err = cli("results", "import-nccl-tests", str(log), "--json")
    assert code == 0, err
    stored = json.loads(cli("results", "show", "--json")[1])
    assert stored["environment"]["backend"] == "gloo"
    assert [(r["size_bytes"], r["in_place"]) for r in stored["results"]] == [
        (1024, False), (1024, True), (1048576, False), (1048576, True)]


def test_nccl_tests_sizes_and_flags():
    import argparse

    from willitscale.bench.options import (
        add_collective_args,
        nccl_tests_size,
        options_from_args,
    )
    from willitscale.errors import ConfigError

    assert nccl_tests_size("128M", "b") == 128 * 2**20
    assert nccl_tests_size("8", "b") == 8
    assert nccl_tests_size("1G", "b") == 2**30 and nccl_tests_size("4k", "b") == 4096
    assert nccl_tests_size("128MB", "b") == 128 * 2**20  # what follows the unit is ignored
    with pytest.raises(ConfigError):
        nccl_tests_size("12X", "b")
    parser = argparse.ArgumentParser()
    add_collective_args(parser)
    parser.add_argument("--format", default="table")

    def options(*argv):
        return options_from_args("collectives", parser.parse_args(list(argv)))

    o = options("--format", "nccl-tests", "-b", "8", "-e", "128M", "-f", "2", "-g", "1", "-a", "1")
    assert (o.min_bytes, o.max_bytes, o.factor, o.mode, o.time_reduce) == (8, 128 * 2**20, 2.0, "both", "mean")
    o = options("--format", "nccl-tests", "-b", "1M", "-e", "4M")  # no -f: steps of -i 1M
    assert (o.factor, o.step_bytes) == (None, 2**20)
    o = options("-b", "1MB", "-e", "128MB")  # willitscale's own units elsewhere
    assert (o.min_bytes, o.max_bytes, o.mode) == (10**6, 128 * 10**6, "out-of-place")
    with pytest.raises(ConfigError, match="one process per GPU"):
        options("-g", "8")
