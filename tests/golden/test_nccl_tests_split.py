"""The published nccl-tests validation set: its fit/test split follows its committed rule.

The rule is written at the top of src/willitscale/validation/nccl_tests.toml; these tests
re-derive the split and the row stability from it, so a source cannot move between sides (or
a row in or out) without the test failing.
"""

from __future__ import annotations

from willitscale.validation.nccl_tests import (
    derive_split,
    is_unstable,
    load_sweeps,
    rows,
)


def test_every_sweep_sits_on_the_side_its_rule_gives():
    side = derive_split()
    for sweep in load_sweeps():
        want = side[sweep.source_id] if sweep.use else "excluded"
        assert sweep.split == want, sweep.id


def test_row_stability_is_rule_4():
    for sweep in load_sweeps():
        for row in sweep.rows:
            assert row.stable == (not is_unstable(row.time_us, row.inplace_time_us)), (sweep.id, row)


def test_rows_are_nccl_tests_lines():
    # nccl-tests prints algbw = size / time (GB/s, GB = 1e9); every row big enough to print
    # algbw to 1% must satisfy it to 2% (rounding of the printed time), and busbw / algbw is the
    # op's factor for the sweep's ranks (2(n-1)/n for all_reduce, (n-1)/n for all_gather)
    factor = {"all_reduce": lambda n: 2 * (n - 1) / n, "all_gather": lambda n: (n - 1) / n,
              "sendrecv": lambda n: 1.0}
    for sweep in load_sweeps():
        if not sweep.use:
            continue
        assert sweep.citation and sweep.setup.preset
        for row in sweep.rows:
            if row.algbw_GBps >= 1:
                assert abs(row.size_bytes / row.time_us / 1e3 / row.algbw_GBps - 1) < 0.02, row
                ratio = row.busbw_GBps / row.algbw_GBps
                assert abs(ratio / factor[sweep.op](sweep.ranks) - 1) < 0.01, (sweep.id, row)


def test_counts_per_side():
    # the counts the rule gave when it was committed (research note SPLIT.md): 375 fit and
    # 288 test rows, usable and stable
    assert sum(1 for _ in rows("fit")) == 375
    assert sum(1 for _ in rows("test")) == 288
