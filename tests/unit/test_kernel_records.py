"""Rows of the kernel benchmarks (results.kernel_records): JSON round trip, FLOP counts,
validation; repeats of attention runs skip the points a backend could not run."""

from __future__ import annotations

import pytest

from willitscale.errors import ConfigError
from willitscale.results.kernel_records import (
    AttentionRow,
    BandwidthRow,
    attention_flops,
)
from willitscale.results.records import row_from_json
from willitscale.results.repeats import compare_runs


def _row(**kw):
    base = dict(backend="FLASH_ATTENTION", direction="forward", causal=False, dtype="bfloat16",
                batch=4, heads=16, seq_len=4096, head_dim=128, device="NVIDIA H100 80GB HBM3", time=1e-3)
    return AttentionRow(**{**base, **kw})


def test_attention_flops_by_hand():
    # b 4, h 16, s 4096, d 128: forward 4 x 4 x 16 x 4096^2 x 128 = 549,755,813,888
    assert attention_flops(batch=4, heads=16, seq_len=4096, head_dim=128, causal=False,
                           direction="forward") == 549_755_813_888
    assert attention_flops(batch=4, heads=16, seq_len=4096, head_dim=128, causal=True,
                           direction="backward") == 549_755_813_888 * 2.5 / 2
    with pytest.raises(ConfigError):
        attention_flops(batch=1, heads=1, seq_len=1, head_dim=1, causal=False, direction="sideways")


def test_rows_round_trip_through_json():
    for row in (_row(), _row(status="unsupported", reason="no kernel", time=None),
                BandwidthRow(op="copy", elements=1024, dtype="bfloat16", size_bytes=4096,
                             device="cpu", time=2e-6)):
        assert row_from_json(row.kind, row.to_json()) == row
    data = _row().to_json()
    assert data["achieved_TFLOPS"] == pytest.approx(549.755813888)  # 5.5e11 FLOPs in 1 ms
    assert _row(status="skipped", reason="x", time=None).to_json()["achieved_TFLOPS"] is None


def test_a_row_is_ok_exactly_when_it_has_a_time():
    with pytest.raises(ConfigError):
        _row(status="unsupported", reason="x")  # a time without ok
    with pytest.raises(ConfigError):
        _row(time=None)  # ok without a time
    with pytest.raises(ConfigError):
        _row(status="maybe")


def test_repeats_of_attention_runs_leave_out_points_without_a_rate():
    ok, none = _row().to_json(), _row(backend="CUDNN_ATTENTION", status="unsupported", reason="x",
                                      time=None).to_json()
    faster = _row(time=0.5e-3).to_json()
    points, deviations = compare_runs("attention", [(1, "a", [ok, none]), (2, "b", [faster, none])])
    assert len(points) == 1 and points[0].runs == 2
    # median of 549.8 and 1099.5 TFLOP/s is their mean, 824.6: run 1 is -1/3, run 2 +1/3
    assert [round(d.deviation, 6) for d in deviations] == [round(-1 / 3, 6), round(1 / 3, 6)]
