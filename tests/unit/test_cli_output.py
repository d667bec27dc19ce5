"""How text and tables are laid out: wrapped between phrases at a known width (a terminal or
COLUMNS), not wrapped at all when piped without COLUMNS, and table cells never cut to "…"."""

from __future__ import annotations

import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from willitscale.cli.linebreaks import MIN_FILL, line_breaks, wrap_lines
from willitscale.cli.output import UNWRAPPED, console, output_width, print_table

NOTE = ("assumption: node dgx-h100: 8 GPUs per node, each link derated to its catalog efficiency "
        "(nvlink4 x 0.8, 8 x ib-ndr x 0.92)")


def test_a_phrase_boundary_wins_over_the_last_space_that_fits():
    # 80 columns: the last space that fits is inside the parenthesis ("... (nvlink4 x 0.8, 8 x");
    # the comma after "per node" ends a phrase and leaves the line 44/80 = 55% full (>= MIN_FILL)
    lines = wrap_lines(NOTE, 80)
    assert lines == ["assumption: node dgx-h100: 8 GPUs per node,",
                     "  each link derated to its catalog efficiency (nvlink4 x 0.8, 8 x ib-ndr x 0.92)"]
    assert 44 / 80 >= MIN_FILL


def test_a_number_stays_with_its_unit():
    import textwrap

    text = ("weights 2.90 GiB · gradients 5.80 GiB · optimizer 17.4 GiB · activations 2.55 GiB "
            "(handbook-18)")
    # a plain word wrap at 78 ends the first line with "2.55" and starts the next with "GiB"
    assert textwrap.wrap(text, 78)[0].endswith("activations 2.55")
    assert wrap_lines(text, 78) == ["weights 2.90 GiB · gradients 5.80 GiB · optimizer 17.4 GiB ·",
                                    "  activations 2.55 GiB (handbook-18)"]


def test_continuations_hang_under_their_line():
    lines = wrap_lines("  fix a larger batch per GPU: --grad-accum 48 (global batch 1536) or a "
                       "micro-batch 6x larger", 50)
    assert lines[0].startswith("  fix") and all(x.startswith("    ") for x in lines[1:])


def test_a_word_longer_than_the_line_is_cut_not_lost():
    spans = line_breaks("x" * 25, 10, hang=2)
    assert spans == [(0, 10), (10, 18), (18, 25)]  # 10, then 10 - 2 of hang, then the rest


words = st.lists(st.text(alphabet="abcdefghij(),;:.0123456789", min_size=1, max_size=12),
                 min_size=1, max_size=40)


@given(words, st.integers(min_value=20, max_value=120), st.integers(min_value=0, max_value=6))
def test_every_word_is_kept_in_order_and_every_line_fits(parts, width, hang):
    text = " ".join(parts)
    spans = line_breaks(text, width, hang=hang)
    pieces = [text[a:b] for a, b in spans]
    assert " ".join(pieces).split() == text.split()  # nothing lost, nothing reordered
    assert len(pieces[0]) <= width
    assert all(len(p) <= width - hang for p in pieces[1:])
    assert spans[0][0] == 0 and spans[-1][1] == len(text)


def test_piped_output_is_not_wrapped_unless_columns_says_so(monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    assert output_width(io.StringIO()) == UNWRAPPED  # a pipe or a file: no width to fit
    buf = io.StringIO()
    console(buf).print(NOTE)
    assert buf.getvalue() == NOTE + "\n"  # one line: grep finds it whole
    monkeypatch.setenv("COLUMNS", "60")
    assert output_width(io.StringIO()) is None  # rich's own: COLUMNS
    buf = io.StringIO()
    console(buf).print(NOTE)
    lines = buf.getvalue().splitlines()
    assert len(lines) > 1 and max(map(len, lines)) <= 60


ROWS = [["all_reduce", 16_000_000, 4_000_000, "float32", "sum", "14272", "1.12", "1.12", 0]]
COLUMNS = ["op", "size", "count", "type", "redop", "time", "algbw", "busbw", "#wrong"]
UNITS = ["", "(B)", "(elements)", "", "", "(us)", "(GB/s)", "(GB/s)", ""]


@pytest.mark.parametrize("columns", [None, "80", "60", "40"])
def test_a_table_never_loses_a_cell(monkeypatch, columns):
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    buf = io.StringIO()
    print_table("collectives, 2 ranks on 1 node(s), a title longer than the narrowest width",
                COLUMNS, ROWS, units=UNITS, file=buf)
    out = buf.getvalue()
    assert "…" not in out
    lines = out.splitlines()
    if columns is not None:
        assert max(map(len, lines)) <= int(columns)
    # every cell is there, whole or folded over lines: its characters appear in order
    flat = "".join(out.split())
    for cell in ROWS[0]:
        assert str(cell) in flat or all(c in flat for c in str(cell))
    if columns in (None, "80"):  # these widths fit the table: each cell on its row, whole
        row = next(line for line in lines if "all_reduce" in line)
        assert all(str(cell) in row for cell in ROWS[0])
