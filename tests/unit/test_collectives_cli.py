"""`willitscale collective OP`: the acceptance lines of issue 2 and the error paths."""

import json

import pytest


def test_acceptance_ring_1GB_8_ranks(cli):
    code, out, err = cli("collective", "all_reduce", "--size", "1GB", "--ranks", "8", "--bandwidth",
                         "100GB/s", "--latency", "0", "--algorithm", "ring", "--json")
    assert code == 0, err
    data = json.loads(out)
    # 2·7/8·1e9 / 1e11 = 0.0175 s; busbw = algbw x 2·7/8 = 100 GB/s; 2·7/8·1e9 bytes sent per rank
    assert data["time_s"] == 0.0175
    assert data["busbw_GBps"] == 100
    assert data["bytes_sent_per_rank"] == 1.75e9
    assert data["algorithm"] == "ring" and data["ranks"] == 8


def test_acceptance_resnet50_parameter_server_without_a_link(cli):
    code, out, err = cli("collective", "all_reduce", "--size", "97.5MB", "--ranks", "256", "--json")
    assert code == 0, err
    data = json.loads(out)
    assert set(data) >= {"results", "fastest", "assumptions"}
    assert any("default link" in a for a in data["assumptions"])  # says which default it used
    names = [r["algorithm"] for r in data["results"]]
    # every algorithm that can all-reduce on one level
    assert sorted(names) == sorted(["ring", "double_binary_tree", "halving_doubling", "binary_tree",
                                    "naive", "parameter_server"])
    ps = next(r for r in data["results"] if r["algorithm"] == "parameter_server")
    # seeds/004: the server takes in 256 x 97.5 MB and sends 256 x 97.5 MB back = 24.96 GB each way
    assert ps["peak_node_bytes_in"] == pytest.approx(256 * 97.5e6)
    assert ps["peak_node_bytes_out"] == pytest.approx(256 * 97.5e6)
    assert ps["fan_in"] == 256 and ps["rounds"] == 2
    assert data["fastest"] in names
    assert {a["algorithm"] for a in data["not_applicable"]} == {"direct", "hierarchical"}


def test_human_table_marks_the_choice_and_states_assumptions(cli):
    code, out, _ = cli("collective", "all_reduce", "--size", "97.5MB", "--ranks", "256")
    assert code == 0
    assert "double_binary_tree *" in out
    assert "assumption: no link given" in out
    assert "parameter_server" in out and "* chosen:" in out


def test_two_levels_from_flags(cli):
    code, out, err = cli("collective", "all_reduce", "--size", "1GB", "--ranks", "16", "--bandwidth", "450GB/s",
                         "--latency", "1us", "--ranks-per-node", "8", "--inter-bandwidth", "8x400Gbps",
                         "--inter-latency", "5us", "--algorithm", "hierarchical", "--json")
    assert code == 0, err
    data = json.loads(out)
    # inside: 2·7/8·1e9 / 450e9 = 3.889 ms; across: 8 x 400 Gb/s = 400 GB/s per node, 2·1/2·1e9 / 4e11
    # = 2.5 ms; latency 2·7·1 us + 2·1·5 us = 24 us.
    assert data["time_s"] == pytest.approx(1.75e9 / 450e9 + 1e9 / 400e9 + 24e-6, rel=1e-9)
    assert data["network"]["inter"]["bandwidth_GBps"] == 400
    assert data["assumptions"][0].startswith("alpha-beta model")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["all_reduce", "--size", "1GB", "--ranks", "8", "--algorithm", "direct"], "direct cannot run all_reduce"),
        (["allgather", "--size", "1GB", "--ranks", "8", "--algorithm", "tree"], "binary_tree cannot run all_gather"),
        (["all_reduce", "--size", "1GB", "--ranks", "8", "--inter-bandwidth", "400GB/s"], "needs --ranks-per-node"),
        (["all_reduce", "--size", "1GB", "--ranks", "12", "--bandwidth", "1GB/s", "--ranks-per-node", "8",
          "--inter-bandwidth", "1GB/s"], "multiple of ranks_per_node = 8"),
        (["all_reduce", "--size", "1GB", "--ranks", "8", "--ranks-per-node", "8"], "needs --bandwidth"),
        (["all_reduce", "--size", "lots", "--ranks", "8"], "--size"),
        (["all_reduce", "--size", "1GB", "--ranks", "0"], "--ranks"),
        (["all_reduce", "--size", "1GB", "--ranks", "8", "--latency", "5"], "ambiguous"),
        (["allsum", "--size", "1GB", "--ranks", "8"], "OP = 'allsum'"),
    ],
)
def test_bad_input_is_one_clear_line(cli, argv, message):
    code, _, err = cli("collective", *argv)
    assert code == 2
    assert message in err and "Traceback" not in err
    assert err.count("\n") == 1


def test_other_ops_run(cli):
    for op in ("reduce_scatter", "all_gather", "broadcast", "reduce", "all_to_all", "send_recv"):
        code, out, err = cli("collective", op, "--size", "64MiB", "--ranks", "24", "--json")
        assert code == 0, (op, err)
        assert json.loads(out)["results"]


def test_link_from_catalog_is_derated_and_said(cli):
    import json

    code, out, _ = cli("collective", "all_reduce", "--size", "1GB", "--ranks", "8", "--link", "ib-ndr",
                       "--algorithm", "ring", "--json")
    assert code == 0
    data = json.loads(out)
    # ib-ndr: 400 Gb/s = 50 GB/s one direction, x 0.92 catalog efficiency = 46 GB/s.
    # ring: 2*(8-1)/8 * 1e9 B / 46e9 B/s = 0.0380435 s moving bytes.
    assert data["bandwidth_time_s"] == pytest.approx(1.75e9 / 46e9, rel=1e-9)
    assert any("ib-ndr" in note for note in data["assumptions"])


def test_node_preset_gives_two_levels(cli):
    import json

    code, out, _ = cli("collective", "all_reduce", "--size", "1GB", "--ranks", "16", "--node", "dgx-h100",
                       "--algorithm", "ring", "--backend", "alpha-beta", "--json")
    assert code == 0
    data = json.loads(out)
    # the alpha-beta model (--node alone gives NCCL's): DGX H100: NVLink 4 450 GB/s x 0.8 = 360 GB/s per GPU inside; 8 x NDR 50 GB/s x 0.92 = 368 GB/s
    # per node across. A NIC per GPU, so each ring leaves the node through a different GPU and a
    # GPU's NVLink carries 7/8 of the bytes: effective 360 x 8/7 = 411 GB/s; the NICs (368) limit.
    # Two-level ring: 2*(16-1)/16 * 1e9 / 368e9 = 5.095 ms.
    assert data["bandwidth_time_s"] == pytest.approx(2 * 15 / 16 * 1e9 / 368e9, rel=1e-9)


def test_link_and_explicit_bandwidth_conflict(cli):
    code, _, err = cli("collective", "all_reduce", "--size", "1GB", "--ranks", "8", "--link", "ib-ndr",
                       "--bandwidth", "1GB/s")
    assert code == 2 and "drop --bandwidth" in err
