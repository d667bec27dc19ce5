"""``willitscale discover``: the CPU side on this machine, and node presets from captured
``nvidia-smi topo -m`` matrices.

The H100 and A100 matrices are the captures printed in /work/shared/seeds/000_7d6d1081ea6fefb3.txt
(the early copy of stas00/ml-engineering's network chapter, "A100 topology" and "H100
topology"). Those captures show no NICs and no ``nvidia-smi`` GPU list: the GPU names, memory
and InfiniBand ports below are written here, in the formats nvidia-smi and /sys print them, and
say so. Real captures from H100 nodes are in tests/data/discover/ (test_discover_captures.py).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import willitscale as wis
from willitscale.bench.discover import (
    closest_node,
    compared_with,
    discover_node,
    preset_toml,
)
from willitscale.bench.topo import parse_topo_matrix
from willitscale.cli.main import main

SEED = Path("/work/shared/seeds/000_7d6d1081ea6fefb3.txt")

H100_TOPO = """\
      GPU0  GPU1  GPU2  GPU3  GPU4  GPU5  GPU6  GPU7  CPU Affinity  NUMA Affinity
GPU0   X    NV18  NV18  NV18  NV18  NV18  NV18  NV18   0-51         0
GPU1  NV18   X    NV18  NV18  NV18  NV18  NV18  NV18   0-51         0
GPU2  NV18  NV18   X    NV18  NV18  NV18  NV18  NV18   0-51         0
GPU3  NV18  NV18  NV18   X    NV18  NV18  NV18  NV18   0-51         0
GPU4  NV18  NV18  NV18  NV18   X    NV18  NV18  NV18  52-103        1
GPU5  NV18  NV18  NV18  NV18  NV18   X    NV18  NV18  52-103        1
GPU6  NV18  NV18  NV18  NV18  NV18  NV18   X    NV18  52-103        1
GPU7  NV18  NV18  NV18  NV18  NV18  NV18  NV18   X    52-103        1
"""
A100_TOPO = H100_TOPO.replace("NV18", "NV12").replace("0-51 ", "0-23 ").replace("52-103", "24-47 ")


def facts(topo: str, name: str, memory_mib: int, *, ib_rate: str | None = None, peermem=True):
    """host_facts()-shaped facts: 8 GPUs as nvidia-smi lists them, 8 InfiniBand ports as /sys
    shows them (written here, not captured)."""
    ports = [] if ib_rate is None else [
        {"device": f"mlx5_{i}", "port": "1", "rate": ib_rate, "state": "4: ACTIVE",
         "link_layer": "InfiniBand", "numa_node": i // 4} for i in range(8)]
    return {"hostname": "node0", "cpu": "x", "cpus": 208, "numa": [{"node": 0, "cpus": "0-51"}],
            "gpus": [{"index": i, "name": name, "memory_bytes": memory_mib * 2**20} for i in range(8)],
            "topology": parse_topo_matrix(topo), "infiniband": ports, "interfaces": [],
            "peermem": peermem}


def test_the_seed_still_prints_these_matrices():
    text = SEED.read_text()
    for line in H100_TOPO.splitlines() + A100_TOPO.splitlines()[1:]:
        assert line.strip() in text


def test_dgx_h100_capture_gives_the_builtin_presets_gpu_nvlink_and_nics():
    # nvidia-smi names an H100 SXM5 "NVIDIA H100 80GB HBM3" with 81559 MiB
    d = discover_node(facts(H100_TOPO, "NVIDIA H100 80GB HBM3", 81559, ib_rate="400 Gb/sec (4X NDR)"),
                      wis.load_catalog())
    # NV18 on every pair: NVSwitch, 18 links per GPU = NVLink 4 (the catalog's nvlink4 has 18);
    # two H100s fit "H100 80GB" (SXM and PCIe): the NVLink decides for the SXM
    assert (d.gpus, d.gpu, d.intra_link, d.intra_topology) == (8, "h100-sxm", "nvlink4", "nvswitch")
    assert (d.nics, d.nic, d.nic_rate_Gbps) == (8, "ib-ndr", 400)  # 400 Gb/s = 50 GB/s = ib-ndr
    node = closest_node(d, wis.load_catalog())
    assert node.name == "dgx-h100"
    same, differ = compared_with(d, node)
    assert same == ["gpu", "gpus_per_node", "intra_link", "intra_topology", "nic", "nics"]
    assert ("nvswitches", None, 4) in differ and ("nvswitch", None, "nvswitch-v3") in differ
    assert d.warnings == ()


def test_a100_capture_is_nvlink3_through_nvswitch():
    d = discover_node(facts(A100_TOPO, "NVIDIA A100-SXM4-80GB", 81920, ib_rate="200 Gb/sec (4X HDR)"),
                      wis.load_catalog())
    assert (d.gpu, d.intra_link, d.intra_topology, d.nic) == ("a100-80gb-sxm", "nvlink3", "nvswitch", "ib-hdr")


def test_warnings_far_nics_and_no_gpudirect():
    tabs = ("\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tSYS\tSYS\t0-31\t0\n"
            "GPU1\tSYS\t X \tPIX\t32-63\t1\n"
            "NIC0\tSYS\tPIX\t X \t\t\n\nNIC Legend:\n\n  NIC0: mlx5_0\n")
    f = facts(H100_TOPO, "NVIDIA H100 PCIe", 81559, ib_rate="400 Gb/sec (4X NDR)", peermem=False)
    f["gpus"], f["topology"] = f["gpus"][:2], parse_topo_matrix(tabs)
    d = discover_node(f, wis.load_catalog())
    assert d.intra_topology == "pcie" and d.gpu == "h100-pcie" and d.intra_link == "pcie5"
    text = " | ".join(d.warnings)
    assert "GPU0 reaches every NIC across NUMA nodes" in text and "GPU1 reaches" not in text
    assert "GPU pairs across NUMA nodes without NVLink: GPU0-GPU1" in text
    assert "no nvidia_peermem" in text
    assert "PCIe switch" not in text  # GPU0-GPU1 is SYS here


def test_gpus_behind_one_pcie_switch_are_named():
    tabs = ("\tGPU0\tGPU1\tGPU2\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tPIX\tNODE\t0-31\t0\n"
            "GPU1\tPIX\t X \tNODE\t0-31\t0\n"
            "GPU2\tNODE\tNODE\t X \t0-31\t0\n")
    f = facts(H100_TOPO, "NVIDIA H100 PCIe", 81559)
    f["gpus"], f["topology"] = f["gpus"][:3], parse_topo_matrix(tabs)
    d = discover_node(f, wis.load_catalog())
    assert [w for w in d.warnings if "PCIe switch" in w] == [
        "GPUs behind one PCIe switch: GPU0-GPU1: their traffic to the host and the NICs shares "
        "the switch's uplink"]


def test_written_preset_is_loaded_by_the_catalog(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path))
    fake = facts(H100_TOPO, "NVIDIA H100 80GB HBM3", 81559, ib_rate="400 Gb/sec (4X NDR)")
    monkeypatch.setattr("willitscale.bench.environment.host_facts", lambda: dict(fake))
    monkeypatch.setattr("pathlib.Path.exists", lambda self: True if str(self) ==
                        "/sys/module/nvidia_peermem" else os.path.exists(self))
    assert main(["discover", "--write", "--name", "my-node", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["closest_builtin"] == "dgx-h100" and Path(out["preset"]).parent == tmp_path / "catalog"
    cluster = wis.build_cluster(preset="my-node", nodes=2)
    builtin = wis.build_cluster(preset="dgx-h100", nodes=2)
    assert cluster.gpus == builtin.gpus == 16
    assert cluster.node.intra_link == builtin.node.intra_link and cluster.node.nic == builtin.node.nic


def test_cpu_machine_names_its_cpus_and_numa_layout(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path))
    assert main(["discover", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["cpus"] == os.cpu_count()
    nodes = sorted(int(p.name[4:]) for p in Path("/sys/devices/system/node").glob("node[0-9]*"))
    assert [n["node"] for n in out["numa"]] == nodes
    model = next((ln.split(":", 1)[1].strip() for ln in Path("/proc/cpuinfo").read_text().splitlines()
                  if ln.lower().startswith("model name")), None)
    if model:
        assert out["cpu"] == model
    if out["gpus"] == 0:
        assert out["preset"] is None and any("no NVIDIA GPU" in n for n in out["notes"])


def test_no_preset_without_gpus():
    d = discover_node({"hostname": "cpu", "cpus": 2, "numa": []}, wis.load_catalog())
    with pytest.raises(wis.ConfigError, match="no node preset: no GPU found"):
        preset_toml(d, "x", when="now")


def _smi_q(n: int) -> str:
    """``nvidia-smi -q``'s layout (blocks per GPU, 4-space indents, "Name : value"), written
    here: the values are an H100 SXM5's as nvidia-smi names it (not a capture)."""
    blocks = ["==============NVSMI LOG==============", "", "Timestamp : Tue Nov 24 2026",
              f"Attached GPUs                             : {n}"]
    for i in range(n):
        blocks += [f"GPU 00000000:{0x18 + i:02X}:00.0",
                   "    Product Name                          : NVIDIA H100 80GB HBM3",
                   "    Product Brand                         : NVIDIA",
                   "    FB Memory Usage",
                   "        Total                             : 81559 MiB",
                   "        Reserved                          : 328 MiB",
                   "    BAR1 Memory Usage",
                   "        Total                             : 131072 MiB"]
    return "\n".join(blocks) + "\n"


def _ibstat(n: int) -> str:
    """``ibstat``'s layout (CA, tab-indented fields, Port N:), written here, not a capture."""
    out = []
    for i in range(n):
        out += [f"CA 'mlx5_{i}'", "\tCA type: MT4129", "\tNumber of ports: 1", "\tPort 1:",
                "\t\tState: Active", "\t\tPhysical state: LinkUp", "\t\tRate: 400",
                "\t\tBase lid: 7", "\t\tLink layer: InfiniBand"]
    return "\n".join(out) + "\n"


def test_discover_from_saved_outputs_writes_the_dgx_h100s_fields(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "home"))
    saved = tmp_path / "node0"
    saved.mkdir()
    (saved / "nvidia-smi-topo.txt").write_text("$ nvidia-smi topo -m\n" + H100_TOPO)
    (saved / "nvidia-smi-q.txt").write_text(_smi_q(8))
    (saved / "ibstat.txt").write_text(_ibstat(8) + "CA 'mlx5_8'\n\tPort 1:\n\t\tState: Down\n"
                                      "\t\tRate: 10\n\t\tLink layer: Ethernet\n")
    assert main(["discover", "--from", str(saved), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert (out["gpus"], out["gpu"], out["intra_link"], out["nic"], out["nics"]) == (
        8, "h100-sxm", "nvlink4", "ib-ndr", 8)  # the down Ethernet port is not counted
    assert out["closest_builtin"] == "dgx-h100"
    assert out["same_as_builtin"] == ["gpu", "gpus_per_node", "intra_link", "intra_topology", "nic", "nics"]
    assert {d["field"]: (d["discovered"], d["builtin"]) for d in out["differs_from_builtin"]} == {
        "nvswitch": (None, "nvswitch-v3"), "nvswitches": (None, 4), "display_name": (None, "NVIDIA DGX H100")}


def test_discover_from_a_folder_without_outputs_says_what_it_needs(tmp_path, capsys):
    assert main(["discover", "--from", str(tmp_path)]) == 2
    assert "nvidia-smi-topo.txt" in capsys.readouterr().err
