"""The published nccl-tests validation set: its fit/test split follows its committed rule.

The rule is written at the top of src/willitscale/validation/nccl_tests.toml; these tests
re-derive the split and the row stability from it, so a source cannot move between sides (or
a row in or out) without the test failing.
"""

from __future__ import annotations

from dataclasses import replace

from willitscale.validation.nccl_tests import (
    FROZEN_SPLIT,
    derive_split,
    parity_side,
    rule3_split,
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


def test_frozen_table_is_rule_3_as_first_committed():
    # rule 3a froze the assignment rule 3 gave the collected sources: the table must be exactly
    # what the original rule derives from the data (24 sources with usable rows)
    assert rule3_split() == FROZEN_SPLIT and len(FROZEN_SPLIT) == 24
    assert derive_split() == FROZEN_SPLIT


def _with_new_source(source_id: str, stratum: str):
    base = next(s for s in load_sweeps() if s.source_id == "thanos-a100-notes")  # 30 rows
    return load_sweeps() + (replace(base, id=f"{source_id}-sweep", source_id=source_id, stratum=stratum),)


def test_a_source_added_later_moves_no_existing_one():
    # re-running rule 3 with one more stratum-A source of 30 rows ("added-source-0", sorted
    # first by sha256) re-balances stratum A and moves three collected sources between sides:
    # the reason for rule 3a
    sweeps = _with_new_source("added-source-0", "A")
    moved = {k for k, v in rule3_split(sweeps).items() if k in FROZEN_SPLIT and v != FROZEN_SPLIT[k]}
    assert moved == {"hetu-galvatron", "li-plus-playground", "thanos-a100-notes"}
    # under the amended rule every collected source keeps its side and the new one goes by parity
    side = derive_split(sweeps)
    assert {k: side[k] for k in FROZEN_SPLIT} == FROZEN_SPLIT
    assert side["added-source-0"] == parity_side("added-source-0")


def test_parity_side_is_the_low_bit_of_the_first_8_hex_digits():
    # sha256("a") = ca978112..., 0xca978112 is even -> test; sha256("b") = 3e23e816..., even ->
    # test; sha256("c") = 2e7d2c03..., odd -> fit
    assert [parity_side(x) for x in "abc"] == ["test", "test", "fit"]
