"""``willitscale discover --from DIR`` on real outputs posted from 8-GPU H100-class nodes
(tests/data/discover/README.md gives each file's source and date).

Issue 16's acceptance: on captured outputs, discover writes a preset whose GPU count, NVLink
generation and links, NIC count and rate equal the built-in dgx-h100's, and lists every other
field that differs with both values. No public post carries ``nvidia-smi -q``, ``topo -m`` and
``ibstat`` from one DGX H100: the one node with both ``topo -m`` and ``ibstat`` (Mooncake issue
2039) names no GPU model, so the test gives it with ``--gpu``, as a user would.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import willitscale as wis
from willitscale.bench.captures import facts_from_captures, sys_infiniband_ports
from willitscale.bench.discover import compared_with, discover_node, preset_toml
from willitscale.cli.main import main
from willitscale.errors import ConfigError

DATA = Path(__file__).resolve().parents[1] / "data" / "discover"


def _discover(capsys, folder: Path, *extra: str) -> dict:
    assert main(["discover", "--from", str(folder), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_a_real_node_with_topology_and_ibstat_matches_dgx_h100(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path))
    out = _discover(capsys, DATA / "mooncake-2039", "--gpu", "h100-sxm", "--write",
                    "--name", "mooncake-node")
    # the matrix: 8 GPU rows, NV18 between every pair (NVSwitch, 18 NVLink-4 links per GPU);
    # ibstat: 8 ports Active at Rate 400 over InfiniBand (mlx5_0, 3, 4, 5, 6, 9, 10, 11); the
    # two Active Ethernet ports at 100 and the two Down ones are not InfiniBand NICs
    assert (out["gpus"], out["intra_link"], out["intra_topology"]) == (8, "nvlink4", "nvswitch")
    assert (out["nic"], out["nics"], out["nic_rate_Gbps"]) == ("ib-ndr", 8, 400)
    dgx = wis.load_catalog().nodes["dgx-h100"]
    assert (dgx.gpus_per_node, dgx.intra_link.name, dgx.intra_link.links, dgx.nic.name,
            dgx.nics, dgx.nic.bandwidth * 8 / 1e9) == (8, "nvlink4", 18, "ib-ndr", 8, 400)
    assert out["closest_builtin"] == "dgx-h100"
    assert out["same_as_builtin"] == ["gpu", "gpus_per_node", "intra_link", "intra_topology",
                                      "nic", "nics"]
    # what a matrix and ibstat cannot show, listed with both values
    differ = {d["field"]: (d["discovered"], d["builtin"]) for d in out["differs_from_builtin"]}
    assert differ == {"nvswitch": (None, "nvswitch-v3"), "nvswitches": (None, 4),
                      "display_name": (None, "NVIDIA DGX H100")}
    # the preset written loads as a node like the built-in one
    preset = Path(out["preset"])
    assert preset.is_file()
    node = wis.load_catalog().nodes["mooncake-node"]
    assert (node.gpu.name, node.gpus_per_node, node.intra_link.name, node.nic.name, node.nics) == \
        ("h100-sxm", 8, "nvlink4", "ib-ndr", 8)


def test_without_a_gpu_name_the_wiring_is_found_but_no_preset_is_written(capsys):
    facts = facts_from_captures(DATA / "mooncake-2039")
    found = discover_node(facts, wis.load_catalog())
    # NV18 alone does not tell NVLink 4 (H100, H200) from NVLink 5 (B200): both have 18 links
    # per GPU in the catalog, so no link is chosen and the note names both
    assert (found.gpus, found.gpu, found.intra_link, found.nics) == (8, None, None, 8)
    assert any("fits 2 catalog NVLinks (nvlink4, nvlink5)" in n and "give --gpu" in n
               for n in found.notes)
    with pytest.raises(ConfigError, match="unknown gpu"):
        preset_toml(found, "x", when="now")


def test_a_gpu_given_that_the_matrix_contradicts_gets_no_link():
    facts = facts_from_captures(DATA / "mooncake-2039")
    catalog = wis.load_catalog()
    facts["gpu_hint"] = catalog.gpu("a100-80gb")  # NVLink 3: 12 links per GPU, not 18
    found = discover_node(facts, catalog)
    assert found.gpu == "a100-80gb-sxm" and found.intra_link is None
    assert any("the matrix shows 18" in n for n in found.notes)


def test_princeton_della_h100_nodes(capsys):
    out = _discover(capsys, DATA / "princeton-della-pli")
    # nvidia-smi -a: "NVIDIA H100 80GB HBM3", FB memory 81559 MiB, one GPU attached to the job;
    # the matrix (another node of the partition): 8 GPUs, NV18 between every pair
    assert (out["gpu"], out["intra_link"], out["intra_topology"], out["gpus"]) == \
        ("h100-sxm", "nvlink4", "nvswitch", 8)
    assert out["gpu_names"] == ["NVIDIA H100 80GB HBM3"]
    assert any("8 GPUs in the topology matrix, 1 listed by nvidia-smi" in n for n in out["notes"])
    # no ibstat on the page: no NIC, so no preset; the comparison says so field by field
    assert (out["nic"], out["nics"]) == (None, 0)
    differ = {d["field"]: (d["discovered"], d["builtin"]) for d in out["differs_from_builtin"]}
    assert differ["nics"] == (0, 8) and differ["nic"] == (None, "ib-ndr")


def test_a_copy_of_sys_class_infiniband_reads_as_the_live_tree(tmp_path):
    # written here in /sys/class/infiniband's layout (DEVICE/ports/N/{rate,state,link_layer}),
    # the values as the kernel prints them: two ConnectX-7 ports at NDR and one Ethernet bond
    base = tmp_path / "sys-class-infiniband"
    for device, rate, state, layer in (("mlx5_0", "400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand"),
                                       ("mlx5_1", "400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand"),
                                       ("mlx5_bond_0", "200 Gb/sec (2X NDR)", "4: ACTIVE", "Ethernet")):
        port = base / device / "ports" / "1"
        port.mkdir(parents=True)
        for name, value in (("rate", rate), ("state", state), ("link_layer", layer)):
            (port / name).write_text(value + "\n")
    ports = sys_infiniband_ports(base)
    assert [(p["device"], p["rate"], p["state"], p["link_layer"]) for p in ports] == [
        ("mlx5_0", "400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand"),
        ("mlx5_1", "400 Gb/sec (4X NDR)", "4: ACTIVE", "InfiniBand"),
        ("mlx5_bond_0", "200 Gb/sec (2X NDR)", "4: ACTIVE", "Ethernet")]
    found = discover_node(facts_from_captures(tmp_path), wis.load_catalog())
    # the Ethernet bond is not an InfiniBand NIC: 2 ports at 400 Gb/s
    assert (found.nic, found.nics, found.nic_rate_Gbps) == ("ib-ndr", 2, 400)


def test_gpu_is_refused_without_captures(capsys):
    assert main(["discover", "--gpu", "h100-sxm"]) != 0
    assert "--gpu" in capsys.readouterr().err
