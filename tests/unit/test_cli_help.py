"""``--help``: the overview groups the commands by job (the main job first), every command and
subcommand shows at least one example, and every example parses (its flags exist)."""

from __future__ import annotations

import argparse
import re
import shlex

import pytest

from willitscale.cli.helptext import GROUPS
from willitscale.cli.main import COMMAND_MODULES, build_parser


def _parsers(parser, path=("willitscale",)):
    """Every parser under ``parser``, with its command path."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


PARSERS = list(_parsers(build_parser()))


def test_the_overview_lists_every_command_once_main_job_first(monkeypatch):
    monkeypatch.setenv("COLUMNS", "100")
    text = build_parser().format_help()
    where = {name: [m.start() for m in re.finditer(rf"^  {name}  ", text, re.M)]
             for name in COMMAND_MODULES}
    assert all(len(found) == 1 for found in where.values()), where
    order = [name for _, commands in GROUPS for name, _ in commands]
    assert sorted(order) == sorted(COMMAND_MODULES)  # every command has its place and summary
    positions = [where[name][0] for name in order]
    assert positions == sorted(positions)
    assert order[:6] == ["estimate", "scale", "plan", "requirements", "size", "report"]
    assert order[-5:] == ["bench", "results", "emulate", "calibrate", "validate"]
    headings = [title for title, _ in GROUPS]
    assert [text.index(f"{h}:") for h in headings] == sorted(text.index(f"{h}:") for h in headings)


@pytest.mark.parametrize("path, parser", PARSERS, ids=[" ".join(p) for p, _ in PARSERS])
def test_every_help_has_an_example(path, parser):
    text = parser.format_help()
    assert re.search(r"^examples:$", text, re.M) or "Example" in text, " ".join(path)


def _examples(text: str) -> list[str]:
    """The ``$ willitscale ...`` commands of a help text, continuation lines joined."""
    out, current = [], None
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("$ "):
            current = stripped[2:]
        elif current is not None:
            current += " " + stripped
        else:
            continue
        if current.endswith("\\"):
            current = current[:-1].rstrip()
            continue
        out.append(current)
        current = None
    return out


@pytest.mark.parametrize("path, parser", PARSERS, ids=[" ".join(p) for p, _ in PARSERS])
def test_every_example_names_real_flags(path, parser, capsys):
    for example in _examples(parser.format_help()):
        argv = shlex.split(example)
        if argv[0] == "sudo":
            argv = argv[1:]
        if argv[0] != "willitscale":
            continue  # torchrun ...: not ours to parse
        try:
            build_parser().parse_args(argv[1:])
        except SystemExit:
            pytest.fail(f"{' '.join(path)} --help: `{example}` does not parse: "
                        f"{capsys.readouterr().err}")
