"""`willitscale hardware list|show`: the issue's acceptance check and the JSON records."""

import json

import pytest


def test_acceptance_show_h100_sxm(cli):
    # Issue 2 acceptance: dense bf16 ~ 989 TFLOP/s (H100 whitepaper 989.4; the datasheet's
    # "1,979*" is with sparsity) and NVLink 4: 18 links, 450 GB/s one direction, 900 GB/s duplex
    # (18 links x 2 lanes x 100 Gb/s = 3600 Gb/s = 450 GB/s; x 2 directions = 900 GB/s).
    code, out, err = cli("hardware", "show", "h100-sxm")
    assert code == 0, err
    bf16 = next(line for line in out.splitlines() if line.strip().startswith("bf16"))
    assert bf16.split() == ["bf16", "989.4"]
    # in the peak table, 1978.9 appears only as fp8's dense peak, never as a bf16 figure
    rows = [line.split() for line in out.splitlines() if line.split()[:1] in (["fp16"], ["bf16"], ["fp8"])]
    assert [row[0] for row in rows if "1978.9" in row] == ["fp8"]
    assert "NVLink 4: 18 links, 450 GB/s one direction, 900 GB/s duplex" in out
    assert "source:" in out.lower() and "https://" in out


def test_show_h100_json(cli):
    code, out, _ = cli("hardware", "show", "h100", "--json")
    assert code == 0
    data = json.loads(out)
    assert data["name"] == "h100-sxm" and data["peak_TFLOPS"]["bf16"] == 989.4
    assert data["sparse_peak_TFLOPS"]["bf16"] == 1978.9
    link = data["intra_node_link"]
    assert (link["links"], link["bandwidth_GBps"], link["duplex_bandwidth_GBps"]) == (18, 450, 900)
    assert data["memory_GiB"] == 80 and data["memory_bytes"] == 80 * 2**30


def test_show_link_and_node(cli):
    code, out, _ = cli("hardware", "show", "pcie4")
    assert code == 0
    assert "31.5 GB/s one direction, 63.0 GB/s duplex" in out  # 16 x 16 GT/s x 128/130 / 8
    assert "128b/130b" in out
    code, out, _ = cli("hardware", "show", "baskerville", "--json")
    data = json.loads(out)
    assert data["nic"]["efficiency"] == 0.466 and data["inter_node_bandwidth_Gbps"] == 200
    assert data["peer_bandwidth_GBps"] == 100  # 4 NVLinks x 25 GB/s between a pair


def test_list_json_has_every_kind_with_units(cli):
    code, out, _ = cli("hardware", "list", "--json")
    assert code == 0
    data = json.loads(out)
    assert set(data) == {"gpus", "links", "switches", "nodes"}
    ndr = next(l for l in data["links"] if l["name"] == "ib-ndr")
    assert (ndr["bandwidth_Gbps"], ndr["bandwidth_GBps"], ndr["duplex_bandwidth_GBps"]) == (400, 50, 100)
    assert ndr["latency_us"] == 2.7 and ndr["source"]
    code, out, _ = cli("hardware", "list", "--kind", "node", "--json")
    assert list(json.loads(out)) == ["nodes"]


def test_list_tables_show_units_and_sources(cli):
    code, out, _ = cli("hardware", "list")
    assert code == 0
    for header in ("TFLOP/s", "GiB", "GB/s", "Gb/s", "duplex", "us", "src"):
        assert header in out
    assert "infinity-fabric-mi300x" in out and "p5en-48xlarge" in out  # names never cut
    assert "[1] " in out and "https://" in out  # numbered sources under each table


def test_unknown_name_is_one_line_with_suggestion(cli):
    code, out, err = cli("hardware", "show", "h100sxm")
    assert code == 2 and out == ""
    assert err.startswith("error: unknown catalog entry 'h100sxm'") and "h100-sxm" in err
    assert "Traceback" not in err


def test_extra_catalog_file(cli, tmp_path):
    path = tmp_path / "mine.toml"
    path.write_text('[link.my-nic]\nkind = "ethernet"\nbandwidth = "100Gbps"\nsource = "ours"\n')
    code, out, _ = cli("hardware", "show", "my-nic", "--catalog", str(path), "--json")
    assert code == 0 and json.loads(out)["bandwidth_Gbps"] == 100


@pytest.mark.parametrize("kind", ["gpu", "link", "switch", "node"])
def test_list_each_kind(cli, kind):
    code, out, _ = cli("hardware", "list", "--kind", kind)
    assert code == 0 and out.strip()
