"""build_cluster: presets, bare GPUs, link specs, the defaults it records, and its errors."""

import pytest

from willitscale.errors import ConfigError, UnknownNameError
from willitscale.hardware import LinkKind, build_cluster, load_catalog, parse_link_spec

GB = 1e9
Gb = 1e9 / 8


def test_preset_gives_everything():
    c = build_cluster(preset="dgx-h100", nodes=4)
    assert c.gpus == 32 and c.gpu.name == "h100-sxm"
    assert c.node.intra_link.name == "nvlink4" and c.node.intra_topology == "nvswitch"
    assert (c.node.nics, c.node.nic.name) == (8, "ib-ndr")
    assert c.node.inter_node_bandwidth == 8 * 400 * Gb
    # the report can say which link numbers were used, with their latency/efficiency
    assert any(a.startswith("ib-ndr:") and "efficiency 0.92" in a for a in c.assumptions)


def test_gpu_alone_uses_its_standard_server_and_says_so():
    c = build_cluster(gpu="a100", nodes=2)
    assert c.gpu.name == "a100-80gb-sxm" and c.node.gpus_per_node == 8
    assert c.node.intra_link.name == "nvlink3" and c.node.intra_topology == "nvswitch"
    assert (c.node.nics, c.node.nic.name) == (8, "ib-hdr")
    text = "\n".join(c.assumptions)
    assert "gpus_per_node: 8 (default" in text and "8 x ib-hdr (one port per GPU" in text


@pytest.mark.parametrize("spec, nics, port_bytes, kind", [
    ("200Gbps", 1, 200 * Gb, LinkKind.GENERIC),      # a bare bandwidth is the node's total, 1 port
    ("25GB/s", 1, 25 * GB, LinkKind.GENERIC),
    ("8x400Gbps", 8, 400 * Gb, LinkKind.GENERIC),    # N x = N ports
    ("8xib-ndr", 8, 400 * Gb, LinkKind.INFINIBAND),
    ("4 x efa-v2", 4, 100 * Gb, LinkKind.EFA),
    ("ib-hdr", 8, 200 * Gb, LinkKind.INFINIBAND),     # a bare name keeps the port count
    ("roce-400g", 8, 400 * Gb, LinkKind.ETHERNET),
])
def test_inter_node_specs(spec, nics, port_bytes, kind):
    c = build_cluster(gpu="h100", nodes=2, inter_node=spec)
    assert c.node.nics == nics and c.node.nic.kind is kind
    assert c.node.nic.bandwidth == pytest.approx(port_bytes)


def test_bare_bandwidth_takes_the_defaults_of_the_nearest_kind_and_says_so():
    cat = load_catalog(home=False)
    c = build_cluster(gpu="h100", nodes=2, inter_node="200Gbps")
    ib = cat.link_defaults(LinkKind.INFINIBAND)
    assert (c.node.nic.latency, c.node.nic.efficiency) == (ib.latency, ib.efficiency)
    assert any("generic link" in a and "infiniband defaults" in a for a in c.assumptions)
    # 10 Gb/s is nearest to 10 GbE: Ethernet (RoCE) defaults
    _, link, notes = parse_link_spec("10Gbps", inter=True)
    assert "ethernet defaults" in notes[0]
    # inside a node, 32 GB/s is nearest to PCIe 4.0 x16 (31.5 GB/s): PCIe latency, PCIe wiring
    c = build_cluster(preset="dgx-a100", intra_node="32GB/s")
    assert c.node.intra_link.latency == cat.link_defaults(LinkKind.PCIE).latency
    assert c.node.intra_topology == "pcie" and c.node.nvswitch is None


@pytest.mark.parametrize("spec, per_gpu, topology", [
    ("nvlink4", 450 * GB, "nvswitch"),
    ("pcie5", 16 * 32e9 * 128 / 130 / 8, "pcie"),
    ("600GB/s duplex", 300 * GB, "nvswitch"),   # duplex figures are halved, when labelled
    ("12x25GB/s", 300 * GB, "nvswitch"),        # N x = N links per GPU
])
def test_intra_node_specs(spec, per_gpu, topology):
    c = build_cluster(gpu="h100", intra_node=spec)
    assert c.node.intra_link.bandwidth == pytest.approx(per_gpu)
    assert c.node.intra_topology == topology


def test_pcie_only_multi_gpu_works():
    c = build_cluster(gpu="a100-pcie", nodes=2)
    assert c.node.intra_topology == "pcie" and c.node.gpus_per_node == 8
    assert c.node.usable_intra_bandwidth == pytest.approx(16 * 16e9 * 128 / 130 / 8)


def test_more_gpus_than_a_baseboard_is_allowed_with_a_warning():
    # an NVL72 rack is one 72-GPU NVLink domain: allowed, but said out loud (not only noted)
    c = build_cluster(gpu="h100", gpus_per_node=72)
    assert c.gpus == 72
    assert any("one switched NVLink domain" in w and "--nodes" in w for w in c.warnings)


def test_an_absurd_node_is_a_clear_error():
    # review B12: --gpus-per-node 1000 --gpu h100 silently built a 1000-GPU NVSwitch node. The
    # largest NVLink domain NVIDIA specifies is 576 GPUs (fifth-generation NVLink Switch)
    with pytest.raises(ConfigError, match="gpus_per_node.*1000.*at most 576"):
        build_cluster(gpu="h100", gpus_per_node=1000)
    assert build_cluster(gpu="h100", gpus_per_node=576).gpus == 576


def test_fewer_gpus_of_a_preset_node():
    c = build_cluster(preset="baskerville", gpus_per_node=2)
    # 2 GPUs of a 4-GPU full mesh share only the 4 links between them: 100 GB/s
    assert c.node.usable_intra_bandwidth == pytest.approx(100 * GB)
    c = build_cluster(preset="dgx-h100", gpus_per_node=4)
    assert c.node.nics == 4 and any("4 of its 8 ib-ndr ports" in a for a in c.assumptions)


def test_mi300x_mesh_board():
    c = build_cluster(gpu="mi300x", gpus_per_node=4)
    # still one 64 GB/s link to each peer of the 8-GPU board: 3 peers x 64 GB/s
    assert c.node.peer_bandwidth == pytest.approx(64 * GB)
    assert c.node.usable_intra_bandwidth == pytest.approx(3 * 64 * GB)


@pytest.mark.parametrize("kwargs, match", [
    ({}, "give a preset node"),
    ({"preset": "dgx-h100", "gpu": "a100"}, "preset dgx-h100 has h100-sxm GPUs, not a100-80gb-sxm"),
    ({"preset": "dgx-h100", "gpus_per_node": 16}, "at most 8"),
    ({"gpu": "h100", "nodes": 0}, "nodes = 0"),
    ({"gpu": "h100", "nodes": True}, "nodes = True"),
    ({"gpu": "h100", "gpus_per_node": 2.5}, "gpus_per_node = 2.5"),
    ({"gpu": "h100", "intra_node": "ib-ndr"}, "ib-ndr is a NIC port \\(infiniband\\); use it for inter_node"),
    ({"gpu": "h100", "inter_node": "nvlink4"}, "nvlink4 is a GPU-to-GPU link \\(nvlink\\); use it for intra_node"),
    ({"gpu": "h100", "inter_node": "fast"}, "inter_node = 'fast' is not valid"),
    ({"gpu": "h100", "inter_node": "0x400Gbps"}, "port count >= 1"),
    ({"gpu": "h100", "inter_node": "200"}, "inter_node = '200' is not valid"),
    ({"gpu": "h100", "intra_node": "2xnvlink4"}, "nvlink4 alone"),
    ({"gpu": "mi300x", "gpus_per_node": 16}, "cannot be fully meshed with 7"),
])
def test_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        build_cluster(**kwargs)


def test_unknown_preset_suggests():
    with pytest.raises(UnknownNameError, match="dgx-h100"):
        build_cluster(preset="dgx-h10")
