"""Catalog invariants: every entry sourced, duplex = 2 x one direction, dense < sparse, every
reference resolves, and lookups are case-insensitive with aliases and suggestions."""

import pytest

from willitscale.errors import UnknownNameError
from willitscale.hardware import (
    DTYPES,
    LinkKind,
    get_gpu,
    get_link,
    get_node,
    list_gpus,
    list_links,
    list_nodes,
    load_catalog,
)
from willitscale.hardware.catalog import normalize_name


@pytest.fixture(scope="module")
def cat():
    return load_catalog(home=False)


def test_every_entry_has_a_source(cat):
    entries = [*cat.gpus.values(), *cat.links.values(), *cat.switches.values(), *cat.nodes.values()]
    assert len(entries) > 60
    for entry in entries:
        assert entry.source.strip(), entry.name
    for link in cat.links.values():
        assert link.latency_source.strip() and link.efficiency_source.strip(), link.name


def test_every_link_kind_has_sourced_defaults(cat):
    for kind in LinkKind:
        if kind is not LinkKind.GENERIC:
            d = cat.link_defaults(kind)
            assert d.latency >= 0 and 0 < d.efficiency <= 1
            assert d.latency_source and d.efficiency_source


def test_duplex_is_twice_one_direction(cat):
    for link in cat.links.values():
        assert link.duplex_bandwidth == 2 * link.bandwidth
        assert link.effective_bandwidth == pytest.approx(link.bandwidth * link.efficiency)
    for switch in cat.switches.values():
        assert switch.duplex_bandwidth == 2 * switch.bandwidth == 2 * switch.ports * switch.port_bandwidth


def test_bandwidth_is_links_times_lanes_times_lane_rate(cat):
    derived = 0
    for link in cat.links.values():
        if link.lanes is not None and link.lane_rate is not None:
            assert link.bandwidth == pytest.approx((link.links or 1) * link.lanes * link.lane_rate)
            derived += 1
    assert derived >= 30  # nearly every entry is derived, not typed in


def test_dense_below_sparse_and_sparse_is_twice_dense(cat):
    for gpu in cat.gpus.values():
        assert set(gpu.peak_flops) <= set(DTYPES)
        for dtype, sparse in gpu.sparse_peak_flops.items():
            dense = gpu.peak_flops[dtype]
            assert dense < sparse
            assert sparse == pytest.approx(2 * dense, rel=0.01), (gpu.name, dtype)


def test_references_resolve(cat):
    for gpu in cat.gpus.values():
        if gpu.intra_node_link:
            assert not cat.link(gpu.intra_node_link).kind.inter_node
        if gpu.default_nic:
            assert cat.link(gpu.default_nic).kind.inter_node
        if gpu.nvswitch:
            assert cat.switch(gpu.nvswitch).name == gpu.nvswitch
    for node in cat.nodes.values():
        assert cat.gpu(node.gpu.name) is node.gpu
        assert node.nic.kind.inter_node and not node.intra_link.kind.inter_node
        assert cat.link(node.nic.name).bandwidth == node.nic.bandwidth
        assert cat.link(node.intra_link.name) == node.intra_link or "measured" in node.intra_link.display_name
        if node.nvswitch is not None:
            assert node.nvswitches >= 1 and node.intra_topology == "nvswitch"
            # enough switch ports for every GPU link
            assert node.nvswitches * node.nvswitch.ports >= node.gpus_per_node * node.intra_link.links


def test_names_and_aliases(cat):
    assert cat.gpu("H100").name == "h100-sxm"
    assert cat.gpu("h100_SXM").name == "h100-sxm"
    assert cat.gpu("a100").name == "a100-80gb-sxm"  # documented: a100 means the 80GB SXM part
    assert cat.node("DGX-A100").name == "dgx-a100-640gb"
    assert cat.node("p4d.24xlarge").name == "p4d-24xlarge"
    for alias, (kind, name) in cat.aliases.items():
        assert alias == normalize_name(alias)
        assert cat.find(alias) == (kind, getattr(cat, kind)(name))


def test_unknown_names_suggest_the_closest(cat):
    with pytest.raises(UnknownNameError, match="did you mean.*h100-sxm"):
        cat.gpu("h100sxm")
    with pytest.raises(UnknownNameError, match="unknown link 'nvlink9'.*nvlink"):
        cat.link("nvlink9")
    with pytest.raises(UnknownNameError, match="unknown node"):
        cat.node("h100")  # a GPU's name is not a node


def test_shortcuts_use_the_same_catalog():
    assert get_gpu("h100").peak("bf16") == pytest.approx(989.4e12)
    assert get_link("ib-ndr").bandwidth == 50e9
    assert get_node("dgx-h100").nics == 8
    assert {g.name for g in list_gpus()} >= {"v100-sxm2-32gb", "a100-40gb-sxm", "a100-80gb-sxm",
                                              "a100-40gb-pcie", "a100-80gb-pcie", "a800-80gb-sxm",
                                              "h100-sxm", "h100-pcie", "h800-sxm", "h200-sxm", "b200", "mi300x"}
    assert len(list_links()) >= 40 and len(list_nodes()) >= 15


def test_loading_is_cached(cat):
    assert load_catalog(home=False) is cat
