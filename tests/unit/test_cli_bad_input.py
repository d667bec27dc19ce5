"""Bad input on the command line: one line naming the field, the value and what is valid, rc != 0
(review 3). Each test is the reviewer's command, or the smallest one that reaches the same check."""

from __future__ import annotations

import pytest

PLAN = ("plan", "--model", "llama3-8b", "--gpu", "h100", "--global-batch", "64", "--seq-len", "4096")


def _one_line_error(code, err, *needles):
    assert code != 0
    lines = [x for x in err.strip().splitlines() if x.strip()]
    assert len(lines) == 1, err
    assert "internal error" not in err and "Traceback" not in err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    return lines[0]


# ------------------------------------------------------------------------- item 1: bounds
def test_plan_gpus_bounded_before_searching(cli):
    from willitscale.hardware.model import MAX_GPUS

    # 10^9 GPUs used all 23 GB of RAM and was killed; the bound is stated in the message
    line = _one_line_error(*cli(*PLAN, "--gpus", "1000000000")[::2], "--gpus", "1000000000")
    assert f"{MAX_GPUS:,}" in line


def test_plan_nodes_bounded_before_searching(cli):
    from willitscale.hardware.model import MAX_GPUS

    # 8-GPU nodes (h100 preset): the node bound is MAX_GPUS / 8
    line = _one_line_error(*cli(*PLAN, "--nodes", "1000000000")[::2], "--nodes", "1000000000")
    assert f"{MAX_GPUS // 8:,}" in line


def test_fabric_sizes_radix_bounded(cli):
    from willitscale.topology.sizing import MAX_RADIX

    line = _one_line_error(*cli("fabric", "sizes", "--radix", "1000000000")[::2], "radix", "1000000000")
    assert str(MAX_RADIX) in line
    code, out, _ = cli("fabric", "sizes", "--radix", str(MAX_RADIX), "--json")
    assert code == 0 and out


# ---------------------------------------------------------- item 2: internal errors -> messages
@pytest.mark.parametrize("argv, needles", [
    (("fabric", "simulate", "--topology", "fat-tree"), ("fat-tree needs --k", "even switch radix")),
    (("fabric", "build", "fat-tree"), ("fat-tree needs --k",)),
    (("fabric", "simulate", "--topology", "torus"), ("torus needs --dims",)),
    (("fabric", "simulate", "--topology", "dragonfly", "--groups", "4"),
     ("dragonfly needs", "--routers-per-group", "--global-links")),
])
def test_topology_without_its_sizes_names_the_flag(cli, argv, needles):
    _one_line_error(*cli(*argv)[::2], *needles)


def test_scenario_not_utf8_or_a_directory(cli, tmp_path):
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe garbage")
    _one_line_error(*cli("estimate", str(binary))[::2], str(binary), "not UTF-8")
    folder = tmp_path / "dir.toml"
    folder.mkdir()
    _one_line_error(*cli("estimate", str(folder))[::2], str(folder), "is a directory")


def test_topology_file_not_utf8(cli, tmp_path):
    binary = tmp_path / "topo.json"
    binary.write_bytes(b"\xff\xfe garbage")
    _one_line_error(*cli("fabric", "show", str(binary))[::2], str(binary), "not UTF-8")


@pytest.mark.parametrize("flags, field, value", [
    (("--master-port", "99999"), "master_port", "99999"),  # a TCP port is 16 bits: 1..65535
    (("--nproc", "0"), "nproc", "= 0"),  # 0 ranks was read as "the default": 1 rank
])
def test_bench_launch_flags_checked_before_starting(cli, flags, field, value):
    # checked before torch is imported: the same message with or without torch installed
    line = _one_line_error(*cli("bench", "collectives", "-b", "1KB", "-e", "4KB", "--ops",
                                "all_reduce", *flags)[::2], field, value)
    assert "torch" not in line


def test_collective_buffers_that_do_not_fit_name_the_size():
    from types import SimpleNamespace

    from willitscale.bench.sweep import collective_shape
    from willitscale.bench.verify import make_buffers
    from willitscale.collectives.ops import Op
    from willitscale.errors import BenchmarkError

    class NoMemory:
        def zeros(self, *a, **k):  # what torch's CPU allocator raises for -b 1TB
            raise RuntimeError("[enforce fail at alloc_cpu.cpp:117] can't allocate memory: you "
                               "tried to allocate 1000000000000 bytes")

    torch = NoMemory()
    torch.float32 = "float32"
    torch.distributed = SimpleNamespace(ReduceOp=SimpleNamespace(SUM=0, MAX=1, MIN=2))
    ctx = SimpleNamespace(torch=torch, device="cpu", device_name="cpu", world_size=2, rank=0)
    shape = collective_shape(Op.ALL_REDUCE, 10**12, ranks=2, element_size=4)
    with pytest.raises(BenchmarkError) as info:
        make_buffers(ctx, shape, "float32", in_place=True, redop="sum", root=0)
    message = str(info.value)
    # 10^12 bytes = 1.00 TB (SI); the message names the op, the size and the device
    assert "all_reduce of 1.00 TB" in message and "1,000,000,000,000 bytes" in message
    assert "cpu" in message and "\n" not in message


# ------------------------------------------------------- item 19: the sweep's last size
def test_sweep_end_note_names_the_last_size():
    from willitscale.bench.sweep import sweep_end_note

    # 1,000 B doubled: 1,000 x 2^9 = 512,000 <= 10^6 < 1,024,000 = 1,000 x 2^10
    note = sweep_end_note(1000, 10**6, factor=2.0)
    assert "512,000 B" in note and "1,000,000 B" in note
    # 1 KiB x 2^10 = 1 MiB exactly: the last row is -e, no note
    assert sweep_end_note(1024, 2**20, factor=2.0) is None
    # arithmetic steps: 100, 300, 500 (< 600)
    assert "500 B" in sweep_end_note(100, 600, factor=None, step_bytes=200)


# --------------------------------------------- items 4-5: contradictions and invalid values
def test_size_flops_with_params_and_tokens_is_an_error(cli):
    # 6 x 175e9 x 300e9 = 3.15e23 != 3e23: the two ways to give the work disagree
    _one_line_error(*cli("size", "--params", "175B", "--tokens", "300B", "--flops", "3e23",
                         "--gpu", "h100", "--utilization", "0.4", "--weeks", "4")[::2],
                    "--flops", "3e23", "--tokens")


def test_estimate_measured_step_time_with_hfu_is_an_error(cli):
    _one_line_error(*cli("estimate", "--model", "gpt2-xl", "--gpu", "a100", "--nodes", "4",
                         "--seq-len", "1024", "--compute-time-per-step", "0.2s", "--hfu", "0.5")[::2],
                    "--hfu", "0.5", "--compute-time-per-step")


@pytest.mark.parametrize("flag, value", [("--jobs", "0"), ("--incast", "0")])
def test_fabric_simulate_zero_jobs_or_senders(cli, flag, value):
    _one_line_error(*cli("fabric", "simulate", flag, value)[::2], flag, f"= {value}")


@pytest.mark.parametrize("nodes", ["1,,2", "1,2,"])
def test_scale_nodes_with_empty_entries(cli, nodes):
    _one_line_error(*cli("scale", "--model", "gpt2-xl", "--gpu", "a100-80gb", "--seq-len", "1024",
                         "--nodes", nodes)[::2], "--nodes", repr(nodes))


def test_an_empty_flag_value_is_refused_by_the_parser(cli, capsys):
    # "--nodes ''" was read as "not given" and the default used without a word
    with pytest.raises(SystemExit) as exit_:
        cli("scale", "--model", "gpt2-xl", "--gpu", "a100-80gb", "--nodes", "")
    assert exit_.value.code == 2
    assert "argument --nodes: an empty value" in capsys.readouterr().err


@pytest.mark.parametrize("top", ["-1", "0"])
def test_plan_top_below_one(cli, top):
    # --top -1 printed all plans but one (a Python slice); --top 0 an empty table
    _one_line_error(*cli(*PLAN, "--gpus", "16", "--top", top)[::2], "--top", f"= {top}", ">= 1")


# --------------------------------------------------- item 6: a bare number needs a unit
@pytest.mark.parametrize("argv, field", [
    (("size", "--params", "175B", "--gpu", "h100", "--gpu-memory", "80"), "--gpu-memory"),
    (("estimate", "--model", "gpt2-xl", "--gpu", "a100", "--nodes", "4", "--seq-len", "1024",
      "--bucket-cap", "25"), "--bucket-cap"),
    (("collective", "all_reduce", "--size", "1000", "--ranks", "8"), "--size"),
])
def test_bare_size_needs_a_unit(cli, argv, field):
    # --gpu-memory 80 was read as 80 bytes: "fewest GPUs holding the state 34,999,999,965"
    _one_line_error(*cli(*argv)[::2], field, "'", "unit")


def test_sizes_keep_accepting_zero_and_units():
    from willitscale.units import parse_size

    assert parse_size("0", unit_required=True) == 0
    assert parse_size("25MiB", unit_required=True) == 25 * 2**20
    assert parse_size(80e9, unit_required=True) == 80e9  # a number in code is bytes (SI)
    assert parse_size("80") == 80  # without the flag: bytes, as nccl-tests' -b/-e read them


# ------------------------------------------------ items 8-9: order and naming of errors
def test_width_checked_before_the_estimate(cli):
    code, out, err = cli("estimate", "--model", "gpt2-xl", "--gpu", "a100", "--nodes", "4",
                         "--seq-len", "1024", "--width", "0")
    assert out == ""  # nothing printed before the error (it used to print the whole estimate)
    _one_line_error(code, err, "--width", "= 0", "at least 20")


def test_model_without_a_name_is_a_usage_message(cli):
    line = _one_line_error(*cli("model")[::2], "NAME", "--list")
    assert "None" not in line


def test_unknown_name_plural():
    from willitscale.errors import UnknownNameError

    assert "known catalog entries:" in str(UnknownNameError("catalog entry", "zzzz", ["a100"]))
    assert "known gpus:" in str(UnknownNameError("gpu", "zzzz", ["a100"]))


@pytest.mark.parametrize("flag, value, quantity", [
    ("--params", "-7B", "a count > 0"), ("--params", "0", "a count > 0"),
    ("--allreduce-time", "-1s", "a time > 0"), ("--allreduce-time", "0", "a time > 0"),
])
def test_bounds_say_greater_than_zero_where_zero_is_refused(cli, flag, value, quantity):
    base = ("--model", "gpt2") if flag != "--params" else ()
    _one_line_error(*cli("estimate", *base, f"{flag}={value}", "--gpu", "h100", "--seq-len",
                         "1024")[::2], flag, repr(value), quantity)


def test_scenario_hfu_names_the_file_and_key(cli, tmp_path):
    path = tmp_path / "nanhfu.toml"
    path.write_text('[model]\nname = "gpt2"\n[cluster]\ngpu = "a100"\nnodes = 1\n'
                    '[training]\nseq_len = 1024\nhfu = nan\n')
    line = _one_line_error(*cli("estimate", str(path))[::2], "nanhfu.toml", "hfu", "nan", "(0, 1]")
    assert "--hfu" not in line


def test_catalog_memory_zero_names_the_file_and_key(tmp_path):
    from willitscale.config import Table
    from willitscale.errors import ConfigError

    with pytest.raises(ConfigError, match=r"cat\.toml: memory_GiB = 0 is not valid: expected a number > 0"):
        Table({"memory_GiB": 0}, "cat.toml").quantity("memory", float, {"memory_GiB": 2**30}, positive=True)


# ------------------------------------------- item 11: output paths never make parent chains
@pytest.mark.parametrize("argv, field", [
    (("estimate", "--model", "gpt2", "--gpu", "a100", "--seq-len", "1024", "--trace", "{missing}/y.json"),
     "--trace"),
    (("report", "--model", "gpt2", "--gpu", "a100", "--seq-len", "1024", "--html", "{missing}/x.html"),
     "--html"),
    (("fabric", "build", "fat-tree", "--k", "4", "--save", "{missing}/ft.json"), "--save"),
    (("scale", "--model", "gpt2", "--gpu", "a100", "--seq-len", "1024", "--nodes", "1,2",
      "--plot", "{missing}/figs"), "--plot"),
])
def test_output_path_in_a_missing_directory(cli, tmp_path, argv, field):
    missing = tmp_path / "no" / "such"
    code, out, err = cli(*(a.format(missing=missing) for a in argv))
    _one_line_error(code, err, field, f"directory {missing} does not exist")
    assert not (tmp_path / "no").exists()  # nothing created
    assert out == ""  # checked before any work


def test_plot_creates_its_own_directory_only(tmp_path):
    from willitscale.cli.paths import output_directory

    assert output_directory("--plot")(str(tmp_path / "figs")) == str(tmp_path / "figs")  # parent exists
    (tmp_path / "file").write_text("")
    from willitscale.errors import ConfigError

    with pytest.raises(ConfigError, match="not a file"):
        output_directory("--plot")(str(tmp_path / "file"))


# ------------------------------------------------------ item 12: plan --ep on a dense model
def test_plan_expert_parallel_on_a_dense_model(cli):
    # estimate says it up front; plan listed "ep_needs_moe" rejections, then "No plan fits"
    _one_line_error(*cli(*PLAN, "--gpus", "16", "--ep", "2")[::2], "--ep", "'2'",
                    "mixture-of-experts", "llama3-8b")


# -------------------------------------------- item 14: calibrate picks a run it can fit
def _failed_run(kind="matmul") -> int:
    from willitscale.results.store import Store

    with Store() as store:
        run = store.start_run(kind, options={}, environment={"world_size": 1, "nodes": 1,
                                                             "ranks_per_node": 1})
        store.finish_run(run, "failed")
    return run


def test_calibrate_passes_over_a_failed_latest_run(cli):
    from willitscale.collectives.ops import Op
    from willitscale.results.records import CollectiveRow
    from willitscale.results.store import Store

    env = {"world_size": 2, "nodes": 2, "ranks_per_node": 1, "backend": "gloo", "devices": ["cpu"],
           "emulated": {"uplink_Bps": 25e6}}
    with Store() as store:  # two ranks, one per node: ring all-reduce t = 2 alpha + S / B
        good = store.start_run("collectives", options={}, environment=env)
        for i, size in enumerate((4e6, 8e6)):
            store.add_row(good, i, CollectiveRow(
                op=Op.ALL_REDUCE, size_bytes=int(size), count=int(size) // 4, dtype="float32",
                redop="sum", root=-1, in_place=False, ranks=2, time=2e-3 + size / 23.5e6,
                wrong=0).to_json())
        store.finish_run(good, "complete")
    failed = _failed_run()
    code, out, err = cli("calibrate", "--json")
    assert code == 0, err
    assert f"note: calibrating runs [{good}]" in err and f"run {failed} (matmul), is failed" in err


def test_calibrate_with_only_failed_runs_names_the_latest(cli):
    _failed_run()
    failed = _failed_run()
    _one_line_error(*cli("calibrate")[::2], f"run {failed} (matmul)", "failed with 0 rows",
                    "willitscale results list")


def test_nothing_to_fit_says_why():
    from willitscale.calibrate.build import calibrate
    from willitscale.calibrate.runs import run_from_environment
    from willitscale.errors import ConfigError

    run = run_from_environment({"world_size": 1, "nodes": 1, "ranks_per_node": 1}, kind="matmul", id=7)
    with pytest.raises(ConfigError) as info:
        calibrate([run], created="now")
    assert "notes: )" not in str(info.value) and "()" not in str(info.value)


# ----------------------------------------------- wave 2, issue "Hardening, round 2": bad input
def test_an_unwritable_output_is_an_environment_error_naming_the_file(cli):
    # /dev/full accepts the open and fails the write: an I/O error, exit 1, no "internal error"
    code, _, err = cli("estimate", "--model", "gpt2", "--gpu", "a100-80gb", "--trace", "/dev/full")
    assert code == 1
    _one_line_error(code, err, "/dev/full", "No space left on device")


def test_a_5000_character_model_name_is_an_unknown_name_shown_cut(cli):
    name = "x" * 5000
    line = _one_line_error(*cli("estimate", "--model", name, "--gpu", "a100-80gb")[::2],
                           "unknown model", "(5000 characters)")
    assert len(line) < 600  # the name is cut, not repeated whole


@pytest.mark.parametrize("flag, value, needle", [
    ("--micro-batch", "-5", "an integer >= 1"),
    ("--inter-node", "-1e3Gbps", "a bandwidth such as 200Gbps"),
    ("--seq-len", "-2048", "seq_len"),
])
def test_negative_values_reach_their_check_instead_of_argparse(cli, flag, value, needle):
    # argparse used to read "-1e3Gbps" as an unknown option ("expected one argument")
    line = _one_line_error(*cli("estimate", "--model", "gpt2", "--gpu", "a100-80gb", "--nodes", "2",
                                flag, value)[::2], needle)
    assert "expected one argument" not in line


@pytest.mark.parametrize("link", ["1e-30Gbps", "1EB/s"])
def test_a_link_outside_physical_range_is_a_typo(cli, link):
    # 1e-30 Gb/s leaked a negative span time; 1 EB/s was accepted
    _one_line_error(*cli("estimate", "--model", "gpt2", "--gpu", "a100-80gb", "--nodes", "2",
                         "--inter-node", link)[::2], "bandwidth", "1 kb/s to 1 PB/s", "typo")


def test_memory_in_bits_is_refused(cli):
    # "80Gb" is 80 gigabits = 10 GB: nobody sizes GPU memory in bits
    _one_line_error(*cli("size", "--params", "7e9", "--gpu-memory", "80Gb")[::2],
                    "--gpu-memory", "80GB", "bits (10.0 GB)")


def test_plan_global_batch_zero_is_refused(cli):
    _one_line_error(*cli("plan", "--model", "gpt2", "--gpu", "a100-80gb", "--gpus", "8",
                         "--global-batch", "0")[::2], "global_batch", "an integer >= 1")


def test_scale_to_800_million_gpus_is_refused(cli):
    from willitscale.hardware.model import MAX_GPUS

    _one_line_error(*cli("scale", "--model", "gpt2", "--gpu", "a100-80gb",
                         "--nodes", "1..100000000")[::2], "nodes", f"{MAX_GPUS:,} GPUs")


def test_collective_ranks_bounded(cli):
    _one_line_error(*cli("collective", "all_reduce", "--size", "1GB", "--ranks", "1e12")[::2],
                    "--ranks", "1,048,576")


@pytest.mark.parametrize("argv, flag", [
    (("plan", "--model", "gpt2", "--gpu", "a100-80gb", "--gpus", "8", "--global-batch", "64",
      "--tp", "1,,2"), "--tp"),
    (("plan", "--model", "gpt2", "--gpu", "a100-80gb", "--gpus", "8", "--global-batch", "64",
      "--recompute", "none,,full"), "--recompute"),
    (("requirements", "--params", "2e9,,7e9", "--gpu", "a100-80gb", "--nodes", "4", "--seq-len",
      "2048", "--micro-batch", "1"), "--params"),
])
def test_empty_list_entries_are_refused_not_dropped(cli, argv, flag):
    _one_line_error(*cli(*argv)[::2], flag)


def test_calibrate_unknown_op_named_before_reading_the_store(cli):
    _one_line_error(*cli("calibrate", "--op", "bogus")[::2], "--op", "bogus", "all_reduce")


def test_a_hf_config_with_a_billion_layers_is_refused(cli, tmp_path):
    import json

    config = tmp_path / "config.json"
    config.write_text(json.dumps({"model_type": "llama", "num_hidden_layers": 10**9,
                                  "hidden_size": 4096, "num_attention_heads": 32,
                                  "intermediate_size": 11008, "vocab_size": 32000,
                                  "max_position_embeddings": 4096}))
    # it allocated a (layers x 9) table and died of MemoryError
    _one_line_error(*cli("estimate", "--model", str(config), "--gpu", "h100-sxm")[::2],
                    "layers", "1000000000", "10,000")
