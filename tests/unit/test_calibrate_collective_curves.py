"""`calibrate` fits [[collective]] profile entries: latency and bandwidth per (library, op,
algorithm, protocol) and geometry, in NCCL's own form time = latency + size / bandwidth."""

from __future__ import annotations

import json

import pytest

from willitscale.calibrate.collective_curves import (
    collective_curves,
    fit_latency_bandwidth,
)
from willitscale.calibrate.runs import MeasuredRun, run_from_environment
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError
from willitscale.hardware.calibration import Calibration
from willitscale.hardware.profile import SECTIONS
from willitscale.hardware.profile_collective import CollectiveCurve
from willitscale.results.records import CollectiveRow

SIZES = [1e3, 1e5, 1e6, 1e7, 1e8, 1e9]


def _rows(latency, bandwidth, n, op=Op.ALL_REDUCE):
    return tuple(CollectiveRow(op=op, size_bytes=int(S), count=int(S) // 4, dtype="float32", redop="sum",
                               root=-1, in_place=False, ranks=n, time=latency + S / bandwidth, wrong=0)
                 for S in SIZES)


def _run(backend, *, algo="", proto="", nodes=2, rpn=8, latency=20e-6, bandwidth=10e9, id=4):
    return MeasuredRun(id=id, kind="collectives", started_at="", backend=backend, ranks=nodes * rpn,
                       nodes=nodes, ranks_per_node=rpn, devices=("cuda",), uplink=None,
                       rows=_rows(latency, bandwidth, nodes * rpn), nccl_algo=algo, nccl_proto=proto)


def test_fit_recovers_latency_and_bandwidth_exactly():
    # times made by t = 20 us + S / 10 GB/s: the relative least squares is exact on them
    latency, bandwidth, rms = fit_latency_bandwidth(SIZES, [20e-6 + s / 10e9 for s in SIZES])
    assert latency == pytest.approx(20e-6, rel=1e-6)
    assert bandwidth == pytest.approx(10e9, rel=1e-6)
    assert rms < 1e-9


def test_a_forced_nccl_run_gives_one_entry_named_by_nccl():
    (curve,), notes = collective_curves([_run("nccl", algo="ring", proto="simple")])
    assert not notes
    assert (curve.backend, curve.op, curve.pair) == ("nccl", "all_reduce", "Ring/Simple")
    assert (curve.nodes, curve.ranks_per_node, curve.points, curve.runs) == (2, 8, 6, (4,))
    assert curve.latency == pytest.approx(20e-6, rel=1e-6) and curve.bandwidth == pytest.approx(10e9, rel=1e-6)
    assert (curve.min_size, curve.max_size) == (1e3, 1e9)


def test_an_unforced_nccl_run_is_not_attributed_to_a_guessed_pair():
    curves, notes = collective_curves([_run("nccl")])
    assert curves == [] and "NCCL_ALGO" in notes[0]


def test_a_gloo_run_is_named_by_glooss_ring():
    (curve,), _ = collective_curves([_run("gloo", nodes=2, rpn=2, latency=1e-3, bandwidth=23.5e6)])
    assert (curve.backend, curve.algorithm, curve.protocol) == ("gloo", "ring", "")
    assert curve.bandwidth == pytest.approx(23.5e6, rel=1e-6)


def test_the_environment_record_gives_the_forced_pair():
    env = {"world_size": 16, "nodes": 2, "ranks_per_node": 8, "backend": "nccl", "devices": ["cuda"],
           "hosts": [{"env": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}},
                     {"env": {"NCCL_ALGO": "Tree", "NCCL_PROTO": "LL128"}}]}
    run = run_from_environment(env, kind="collectives")
    assert (run.nccl_algo, run.nccl_proto) == ("Tree", "LL128")
    env["hosts"][1]["env"] = {}  # one node without it: not known
    assert run_from_environment(env, kind="collectives").nccl_algo == ""


def test_the_section_is_registered_and_round_trips_through_the_profile():
    assert SECTIONS["collective"] is CollectiveCurve
    (curve,), _ = collective_curves([_run("nccl", algo="NVLSTree", proto="Simple")])
    cal = Calibration(links=(), compute=(), sections={"collective": (curve,)})
    text = cal.to_toml()
    assert "[[collective]]" in text and 'algorithm = "NVLSTree"' in text
    import tomllib

    again = Calibration.from_toml_data(tomllib.loads(text))
    assert again.section("collective") == (curve,)


def test_bad_entries_are_clear_errors():
    with pytest.raises(ConfigError, match="protocol"):
        CollectiveCurve(backend="nccl", op="all_reduce", algorithm="Ring", protocol="fast", nodes=1,
                        ranks_per_node=8, latency=1e-5, bandwidth=1e9)
    with pytest.raises(ConfigError, match="algbw_GBps"):
        CollectiveCurve(backend="gloo", op="all_reduce", algorithm="ring", nodes=1, ranks_per_node=2,
                        latency=1e-5, bandwidth=0.0)


def test_calibrate_writes_the_collective_section(cli, tmp_path):
    from willitscale.results.store import Store

    env = {"world_size": 2, "nodes": 2, "ranks_per_node": 1, "backend": "gloo", "devices": ["cpu"],
           "emulated": {"uplink_Bps": 25e6}}
    with Store() as store:
        run_id = store.start_run("collectives", options={}, environment=env)
        for i, row in enumerate(_rows(1e-3, 23.5e6, 2)):
            store.add_row(run_id, i, row.to_json())
        store.finish_run(run_id, "complete")
    code, out, err = cli("calibrate", str(run_id), "--json", "--output", str(tmp_path / "c.toml"))
    assert code == 0, err
    (entry,) = json.loads(out)["collective"]
    # rows made by t = 1 ms + S / 23.5 MB/s (Gloo's ring over 2 ranks): the fit returns both
    assert (entry["backend"], entry["algorithm"], entry["protocol"]) == ("gloo", "ring", "")
    assert entry["algbw_GBps"] == pytest.approx(0.0235, rel=1e-6)
    assert entry["latency_us"] == pytest.approx(1000, rel=1e-4)
    assert "[[collective]]" in (tmp_path / "c.toml").read_text()


def test_collective_uses_a_measured_pair_and_says_so(cli, tmp_path):
    # a profile measuring Ring/Simple all_reduce on 1 x 8 dgx-a100 ranks: 30 us + S / 100 GB/s;
    # forced to Ring/Simple, 1 GB then takes 30 us + 10 ms = 10.03 ms, busbw = 1e9 / 10.03e-3 x 7/4
    curve = CollectiveCurve(backend="nccl", op="all_reduce", algorithm="Ring", protocol="Simple", nodes=1,
                            ranks_per_node=8, latency=30e-6, bandwidth=100e9, min_size=1e6, max_size=1e9,
                            points=10, runs=(5,))
    path = tmp_path / "profile.toml"
    path.write_text(Calibration(links=(), compute=(), sections={"collective": (curve,)}).to_toml())
    code, out, err = cli("collective", "all_reduce", "--size", "1GB", "--ranks", "8", "--node", "dgx-a100",
                         "--algorithm", "ring", "--protocol", "simple", "--calibration", str(path), "--json")
    assert code == 0, err
    data = json.loads(out)
    assert data["time_s"] == pytest.approx(30e-6 + 1e9 / 100e9, rel=1e-12)
    assert data["busbw_GBps"] == pytest.approx(1e9 / (30e-6 + 1e-2) * 7 / 4 / 1e9, rel=1e-12)
    assert any("[[collective]]" in a and "runs 5" in a for a in data["assumptions"])
    # another geometry (2 nodes) has no entry: the model's time, and the output says why
    code, out, _ = cli("collective", "all_reduce", "--size", "1GB", "--ranks", "16", "--node", "dgx-a100",
                       "--calibration", str(path), "--json")
    assert any("no [[collective]] entry" in a for a in json.loads(out)["assumptions"])
    code, _, err = cli("collective", "all_reduce", "--size", "1GB", "--ranks", "8", "--backend", "gloo",
                       "--calibration", str(path))
    assert code != 0 and "--calibration" in err


def test_nccl_point_to_point_runs_are_fitted_without_nccl_algo_and_labelled_p2p():
    # NCCL runs send_recv and all_to_all as point-to-point sends (NCCL_ALGO/NCCL_PROTO do not
    # apply): an unforced run of both ops and all_reduce gives the two P2P entries, and a note
    # for the all_reduce rows only. Rows made by t = 20 us + S / 10 GB/s: the fit returns both.
    rows = _rows(20e-6, 10e9, 16, Op.SEND_RECV) + _rows(20e-6, 10e9, 16, Op.ALL_REDUCE) \
        + _rows(30e-6, 5e9, 16, Op.ALL_TO_ALL)
    run = MeasuredRun(id=7, kind="collectives", started_at="", backend="nccl", ranks=16, nodes=2,
                      ranks_per_node=8, devices=("cuda",), uplink=None, rows=rows)
    curves, notes = collective_curves([run])
    by_op = {c.op: c for c in curves}
    assert sorted(by_op) == ["all_to_all", "send_recv"]
    assert {(c.algorithm, c.protocol, c.pair) for c in curves} == {("P2P", "LL/Simple", "P2P (LL/Simple)")}
    assert by_op["send_recv"].latency == pytest.approx(20e-6, rel=1e-6)
    assert by_op["all_to_all"].bandwidth == pytest.approx(5e9, rel=1e-6)
    (note,) = notes
    assert "all_reduce" in note and "NCCL_ALGO" in note
    # forcing NCCL_ALGO/NCCL_PROTO does not relabel a point-to-point entry
    forced = MeasuredRun(**{**{f: getattr(run, f) for f in run.__slots__}, "nccl_algo": "Ring",
                            "nccl_proto": "Simple"})
    assert {(c.op, c.pair) for c in collective_curves([forced])[0]} == {
        ("send_recv", "P2P (LL/Simple)"), ("all_to_all", "P2P (LL/Simple)"), ("all_reduce", "Ring/Simple")}


def test_point_to_point_labels_are_checked():
    kw = dict(backend="nccl", nodes=2, ranks_per_node=1, latency=1e-5, bandwidth=1e9)
    with pytest.raises(ConfigError, match="LL/Simple"):
        CollectiveCurve(op="send_recv", algorithm="Ring", protocol="Simple", **kw)
    with pytest.raises(ConfigError, match="send_recv and all_to_all only"):
        CollectiveCurve(op="all_reduce", algorithm="P2P", protocol="LL/Simple", **kw)
    spelled = CollectiveCurve(op="all_to_all", algorithm="p2p", protocol="ll/simple", **kw)
    assert (spelled.algorithm, spelled.protocol, spelled.model_pair) == ("P2P", "LL/Simple", ("P2P", "Simple"))
    # Gloo's direct sends keep Gloo's own name
    assert CollectiveCurve(op="send_recv", algorithm="direct", **{**kw, "backend": "gloo"}).pair == "direct"


def test_collective_gloo_takes_its_measured_entry_and_alpha_beta_is_refused(cli, tmp_path):
    # a Gloo ring all_reduce measured on 2 nodes x 2 ranks: 1 ms + S / 23.5 MB/s
    curve = CollectiveCurve(backend="gloo", op="all_reduce", algorithm="ring", nodes=2, ranks_per_node=2,
                            latency=1e-3, bandwidth=23.5e6, min_size=1e6, max_size=16e6, points=8, runs=(3,))
    path = tmp_path / "gloo.toml"
    path.write_text(Calibration(links=(), compute=(), sections={"collective": (curve,)}).to_toml())
    two_level = ["--ranks", "4", "--ranks-per-node", "2", "--bandwidth", "1GB/s", "--inter-bandwidth",
                 "200Mbps", "--backend", "gloo", "--calibration", str(path), "--json"]
    code, out, err = cli("collective", "all_reduce", "--size", "4MB", *two_level)
    assert code == 0, err
    d = json.loads(out)
    # 4 MB: 1 ms + 4e6 / 23.5e6 s = 1 ms + 170.2 ms; busbw = algbw x 2 (n-1)/n = x 1.5
    assert d["time_s"] == pytest.approx(1e-3 + 4e6 / 23.5e6, rel=1e-12)
    assert d["busbw_GBps"] == pytest.approx(4e6 / (1e-3 + 4e6 / 23.5e6) * 1.5 / 1e9, rel=1e-12)
    assert d["measured"] is True and any("runs 3" in a for a in d["assumptions"])
    # another op, or another geometry: the model's time, and the note says why
    code, out, _ = cli("collective", "all_gather", "--size", "4MB", *two_level)
    assert code == 0 and "measured" not in json.loads(out)
    assert any("no Gloo [[collective]] entry for all_gather" in a for a in json.loads(out)["assumptions"])
    # one flat level does not say whether the ranks share a node
    code, _, err = cli("collective", "all_reduce", "--size", "4MB", "--ranks", "4", "--backend", "gloo",
                       "--calibration", str(path))
    assert code != 0 and "--ranks-per-node" in err
    code, _, err = cli("collective", "all_reduce", "--size", "4MB", "--ranks", "4", "--backend",
                       "alpha-beta", "--calibration", str(path))
    assert code != 0 and "--backend nccl" in err and "--backend gloo" in err
