"""User text (run labels, hosts, paths, names) is printed as it is: rich never reads it as
markup. `[/]` in a label broke `results list` for the whole store; `[link=...]` made hyperlinks."""

from __future__ import annotations

import io
import json

import pytest

from willitscale.cli.output import print_table
from willitscale.results.store import Store

LABELS = ("[/]", "[link=http://x]y[/link]", "[bold]b[/bold] \\[x]")
#: OSC 8, the escape sequence a terminal turns into a hyperlink
HYPERLINK = "\x1b]8;"


@pytest.fixture
def terminal_colors(monkeypatch):
    """Output as rich writes it to a colour terminal (where [link] would become OSC 8)."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "400")
    monkeypatch.delenv("NO_COLOR", raising=False)


def test_run_labels_are_listed_as_written(cli, terminal_colors):
    with Store() as store:
        for label in LABELS:
            run = store.start_run("matmul", options={}, label=label, environment={
                "world_size": 1, "nodes": 1, "backend": "gloo"})
            store.finish_run(run, "complete")
    code, out, err = cli("results", "list")
    assert code == 0, err
    for label in LABELS:
        assert label in out
    assert HYPERLINK not in out
    listed = json.loads(cli("results", "list", "--json")[1])
    assert [r["label"] for r in listed] == list(reversed(LABELS))


def test_a_table_prints_title_headers_cells_and_caption_verbatim(terminal_colors):
    buf = io.StringIO()
    print_table("[link=http://x]title[/link]", ["[/]", "plain"], [["[red]cell[/red]", None]],
                units=["[dim]", ""], caption="[link=http://y]caption[/link] [/]", file=buf)
    out = buf.getvalue()
    for text in ("[link=http://x]title[/link]", "[/]", "[red]cell[/red]", "[dim]",
                 "[link=http://y]caption[/link] [/]"):
        assert text in out
    assert HYPERLINK not in out


def test_store_paths_with_brackets_import_and_print(cli, tmp_path, terminal_colors):
    folder = tmp_path / "[link=http://x]job[/link]"
    with Store(folder / "results.sqlite") as store:
        run = store.start_run("matmul", options={}, environment={})
        store.finish_run(run, "complete")
    code, out, err = cli("results", "import", str(folder))
    assert code == 0, err
    assert str(folder / "results.sqlite") in out and HYPERLINK not in out
