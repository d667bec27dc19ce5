"""Timelines as data: text lanes and Chrome trace JSON drawn from the same spans."""

import json

import pytest

from willitscale.errors import ConfigError
from willitscale.estimation.timeline import Span, Timeline
from willitscale.report.timeline import render_timeline
from willitscale.report.trace import chrome_trace, write_chrome_trace


def _step():
    return Timeline(step_time=1.0, spans=[
        Span(lane="compute", kind="forward", name="forward", start=0.0, end=0.25),
        Span(lane="compute", kind="backward", name="backward", start=0.25, end=0.75),
        Span(lane="comms", kind="comm", name="all_reduce bucket 0", start=0.3, end=0.6,
             args={"size_bytes": 100}),
        Span(lane="comms", kind="comm", name="all_reduce bucket 1", start=0.6, end=0.9),
        Span(lane="idle", kind="idle", name="waiting for all-reduce", start=0.75, end=0.9),
        Span(lane="compute", kind="optimizer", name="optimizer", start=0.9, end=1.0),
    ])


def test_text_lanes_place_spans_in_proportion():
    text = render_timeline(_step(), width=40)
    lines = text.splitlines()
    compute = next(line for line in lines if line.startswith("compute"))[8:]
    comms = next(line for line in lines if line.startswith("comms"))[8:]
    # width 40, 1 s: forward covers chars 0-9, backward 10-29, optimizer 36-39.
    assert compute.startswith("[") and "fwd" in compute[:10] and "bwd" in compute[10:30]
    assert compute[36:40] == "[##]"  # too narrow for its "opt" label: a bracketed block
    # both all-reduce buckets merge into one block from 0.3 s (char 12) to 0.9 s (char 36)
    assert comms[:12].strip() == "" and comms[12] == "[" and comms[35] == "]"
    assert lines[-2].strip().endswith("1.00 s")
    # the optimizer's block has no room for its label: a legend line says what "#" is
    assert lines[-1].strip() == "too short to label: # opt"


def test_trace_has_one_complete_event_per_span_in_microseconds():
    trace = chrome_trace(_step(), steps=2)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(events) == 2 * 6
    bucket0 = next(e for e in events if e["name"] == "all_reduce bucket 0" and e["args"]["step"] == 1)
    # second step starts at 1 s: 1.3 s = 1.3e6 us, lasting 0.3 s = 3e5 us
    assert bucket0["ts"] == pytest.approx(1.3e6) and bucket0["dur"] == pytest.approx(3e5)
    assert bucket0["args"]["size_bytes"] == 100


def test_trace_file_is_valid_json(tmp_path):
    path = write_chrome_trace(_step(), tmp_path / "step.json")
    assert json.loads(path.read_text())["displayTimeUnit"] == "ms"
    with pytest.raises(ConfigError, match="does not exist"):  # no directory made for a typo
        write_chrome_trace(_step(), tmp_path / "t" / "step.json")


def test_spans_are_validated():
    with pytest.raises(ConfigError):
        Span(lane="gpu", kind="comm", name="x", start=0, end=1)
    with pytest.raises(ConfigError):
        Span(lane="comms", kind="comm", name="x", start=2, end=1)
    with pytest.raises(ConfigError, match="after the step"):
        Timeline(step_time=0.5, spans=[Span(lane="comms", kind="comm", name="x", start=0, end=1)])
