"""The report says what the estimate decided, by the estimate's one criterion: the share of the
step that communication leaves exposed (> 5%: the network is the bottleneck), the link level
that limits it, and out of memory as a verdict of its own."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("matplotlib")

#: seeds/000's job (tests/report/conftest.py HANDBOOK): 2e9 parameters, 8 x A100 80GB per node,
#: 200 Gb/s per node, micro-batch 2 x 2048 tokens, full recomputation, HFU 0.5
HANDBOOK = {"params": 2e9, "gpu": "a100-80gb", "gpus_per_node": 8, "inter_node": "200Gbps",
            "micro_batch": 2, "seq_len": 2048, "hfu": 0.5, "recompute": "full"}

#: Llama-2-7B (6.74e9 parameters) on 2 nodes of 4 A100 80GB PCIe: each GPU reaches the others
#: of its node through its own PCIe 4.0 x16 link (31.5 GB/s one direction, 25.2 GB/s at the
#: catalog's 0.80) while the node has 4 x 200 Gb/s NICs (100 GB/s): PCIe paces the collectives
PCIE = {"model": "llama2-7b", "gpu": "a100-80gb-pcie", "gpus_per_node": 4, "nodes": 2,
        "seq_len": 2048, "micro_batch": 2}
#: Megatron-LM's GPT-3 175B layout (Narayanan et al. 2021, Table 1): tp 8 inside a node, pp 16
PIPELINE = {"model": "gpt3-175b", "gpu": "a100-80gb", "nodes": 128, "gpus_per_node": 8,
            "inter_node": "8x200Gbps", "tp": 8, "pp": 16, "dp": 8, "global_batch": 1536,
            "micro_batch": 1, "seq_len": 2048, "recompute": "full"}


def _contents(settings, sweep):
    from willitscale.report.contents import build_contents

    return build_contents(settings, sweep=sweep)


@pytest.fixture(scope="module")
def handbook():
    return _contents({**HANDBOOK, "nodes": 4}, [1, 2, 4])


@pytest.fixture(scope="module")
def pcie():
    # ZeRO-1 (DeepSpeed) so that it fits: the verdict is about the network
    return _contents({**PCIE, "zero": 1}, [1, 2])


@pytest.fixture(scope="module")
def oom():
    return _contents(PCIE, [1, 2])


def test_the_verdict_states_the_exposed_share_and_names_the_limiting_link(handbook):
    from willitscale.collectives.lines import cluster_links
    from willitscale.report.contents import verdict

    est = handbook.estimate
    text = verdict(handbook)
    # seeds/000 at 4 nodes: the gradient all-reduce is exposed 302 ms of an 823 ms step,
    # 302 / 823 = 36.7% -> "37%", above the 5% that makes the network the bottleneck
    share = est.exposed_comms / est.step_time
    assert 0.36 < share < 0.38
    assert "inter-node network is the bottleneck" in text
    assert f"({share:.0%}" in text and "5%" in text
    # the limiting link is named: the node's one 200 Gb/s NIC, 25.0 GB/s line rate at the
    # catalog's efficiency 0.92 = 23.0 GB/s effective per node
    assert est.bottleneck.level == "inter"
    links = cluster_links(handbook.scenario)
    assert links.inter_bandwidth == pytest.approx(25e9 * 0.92)
    assert "network between nodes, generic 200 Gb/s link at 23.0 GB/s effective per node" in text


def test_the_verdict_and_the_chart_compare_the_same_compute(handbook):
    # "compute" is forward + backward everywhere. Hand arithmetic: full recomputation executes
    # 8 FLOPs per parameter per token, 8 x 2e9 x (2 x 2048) tokens per GPU = 6.55e13 FLOPs at
    # 0.5 x 312 TFLOP/s = 0.420 s; the overlap slowdown and the optimizer are not compute
    from willitscale.report.contents import verdict
    from willitscale.report.figures import scaling_charts
    from willitscale.units import format_time

    expected = 8 * 2e9 * 2 * 2048 / (0.5 * 312e12)
    assert "420 ms of compute" in verdict(handbook)
    charts = {c.name: c for c in scaling_charts(list(handbook.sweep))}
    ax = charts["comms-vs-compute"].figure.axes[0]
    compute_line = next(line for line in ax.lines if line.get_label().startswith("compute"))
    # the chart draws milliseconds (time_unit picks ms below 10 s)
    assert list(compute_line.get_ydata()) == pytest.approx([expected * 1e3] * 3, rel=1e-9)
    assert format_time(expected) == "420 ms"


def test_an_intra_node_limit_is_named_and_priced_per_gpu(pcie):
    from willitscale.report.contents import levers, verdict

    est = pcie.estimate
    assert est.bottleneck.level == "intra" and est.memory.fits is True
    text = verdict(pcie)
    assert "intra-node network is the bottleneck" in text and "PCIe" in text and "per GPU" in text
    # the bandwidth lever raises the limiting link (PCIe, per GPU), not the NICs
    req = pcie.needed
    # PCIe 4.0 x16: 16 lanes x 16 GT/s x 128/130 / 8 = 31.5 GB/s line rate, one direction
    assert req.level == "intra" and req.now == pytest.approx(31.5e9, rel=1e-3)
    labels = [label for label, _ in levers(pcie)]
    assert any(label.startswith("intra-node link") and "per GPU" in label for label in labels)
    assert not any(label.startswith("inter-node bandwidth") for label in labels)
    assert any(label.startswith("twice the intra-node link bandwidth") for label in labels)


def test_an_out_of_memory_plan_gets_an_out_of_memory_verdict(oom):
    # DDP (docs/memory.md): fp32 weights 4 B + fp32 gradients 4 B + Adam 8 B per parameter,
    # plus the DDP bucket copy (4 B), autocast's copies and activations, > 80 GiB usable (the
    # whole GPU, --memory-fraction 1)
    from willitscale.report.contents import verdict
    from willitscale.report.html import render_html

    est = oom.estimate
    assert est.bottleneck.resource == "out of memory"
    assert est.memory.total > 20 * 6.7e9  # 20 bytes x 6.74e9 parameters = 135 GB before the rest
    text = verdict(oom)
    assert text.startswith("No — ") and "does not fit in memory" in text
    from willitscale.units import format_size

    assert f"needs {format_size(est.memory.total, binary=True)} per GPU" in text
    assert "80.0 GiB usable" in text  # 1 x 80 GiB
    page = render_html(oom)
    assert 'class="verdict bad"' in page
    assert "does not fit in memory" in page


def test_the_scaling_table_shows_the_bottleneck_and_whether_it_fits(handbook, oom):
    from willitscale.report.html import _scaling_table

    def cells(table):
        rows = re.findall(r"<tr[^>]*>(.*?)</tr>", table, re.S)
        return [re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", r) for r in rows]

    head, *rows = cells(_scaling_table(handbook))
    limit, fits = head.index("limit"), head.index("fits")
    # seeds/000: 1 and 2 nodes hide the all-reduce, 4 nodes do not (exposed 37%)
    assert [r[limit] for r in rows] == ["compute", "compute", "inter"]
    # a --params scenario has no shape: activations unknown, the state alone fits
    assert {r[fits] for r in rows} == {"?"}
    head, *rows = cells(_scaling_table(oom))
    assert {r[head.index("limit")] for r in rows} == {"OOM"}
    assert {r[head.index("fits")] for r in rows} == {"no"}


def test_a_pipeline_report_sweeps_node_counts_with_dp_filling_the_gpus():
    # dp 8 is given for 128 nodes; the sweep keeps tp 8 x pp 16 and lets dp fill the GPUs:
    # 64 nodes -> dp 4, 256 nodes -> dp 16 (1536 samples split evenly either way)
    c = _contents(PIPELINE, [64, 128, 256])
    assert [e.nodes for e in c.sweep] == [64, 128, 256] and not c.skipped
    assert [e.plan["dp"] for e in c.sweep] == [4, 8, 16]
    levels = {r.nodes: r.level for r in c.requirements}
    assert set(levels) == {64, 128, 256}
    from willitscale.report.html import report_charts

    charts = report_charts(c)
    assert {ch.name for ch in charts["scaling"]} >= {"breakdown", "scaling", "comms-vs-compute"}
    # the limiting link changes along the sweep: every level gets its own panel, none dropped
    (req,) = charts["requirements"]
    assert len(req.figure.axes) == len(set(levels.values()))
