"""Parsing `nvidia-smi topo -m` in both its tab-separated and space-aligned forms."""

from willitscale.bench.topo import gpu_link_summary, parse_topo_matrix

# The A100 node of 000_7d6d1081ea6fefb3.txt ("A100 topology"), first four GPUs, as printed there
A100 = """\
      GPU0  GPU1  GPU2  GPU3  CPU Affinity  NUMA Affinity
GPU0   X    NV12  NV12  NV12   0-23         0
GPU1  NV12   X    NV12  NV12   0-23         0
GPU2  NV12  NV12   X    NV12   24-47        1
GPU3  NV12  NV12  NV12   X     24-47        1
"""

# A current driver's layout: tabs, NICs, empty affinity cells, a legend
TABS = (
    "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
    "GPU0\t X \tPIX\tSYS\t0-31\t0\t\tN/A\n"
    "GPU1\tPIX\t X \tSYS\t32-63\t1\t\tN/A\n"
    "NIC0\tSYS\tSYS\t X \t\t\t\t\n"
    "\nLegend:\n\n  X    = Self\n  SYS  = Connection traversing PCIe as well as the SMP interconnect\n"
    "\nNIC Legend:\n\n  NIC0: mlx5_0\n"
)


def test_space_aligned_matrix_from_the_article():
    topo = parse_topo_matrix(A100)
    assert topo["devices"] == ["GPU0", "GPU1", "GPU2", "GPU3"]
    assert topo["links"]["GPU0"]["GPU3"] == "NV12"
    assert topo["affinity"]["GPU2"] == {"CPU Affinity": "24-47", "NUMA Affinity": "1"}
    assert gpu_link_summary(topo) == "NV12"


def test_tab_separated_matrix_with_nics():
    topo = parse_topo_matrix(TABS)
    assert topo["devices"] == ["GPU0", "GPU1", "NIC0"]
    assert topo["links"]["GPU1"] == {"GPU0": "PIX", "GPU1": "X", "NIC0": "SYS"}
    assert topo["affinity"]["GPU1"]["NUMA Affinity"] == "1"
    assert topo["nics"] == {"NIC0": "mlx5_0"}
    assert gpu_link_summary(topo) == "PIX"


def test_no_matrix():
    assert parse_topo_matrix("No devices were found") is None
    assert gpu_link_summary(None) is None
