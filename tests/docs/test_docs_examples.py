"""Every example in ``docs/*.md`` runs, and its output is what the page says.

The convention (documented in docs/index.md, "How the examples are checked"):

* A ```` ```console ```` block holds commands and their output. A line starting with ``$ `` is a
  command (a trailing ``\\`` continues it on the next line; ``#`` starts a comment, as in a
  shell); the lines after it, up to the next ``$ `` line, are what it prints: standard output,
  then standard error. No lines after a command: only its exit status is checked.
* Matching: trailing spaces and blank lines at either end are ignored; a line that is exactly
  ``...`` matches any number of lines (none included); ``...`` inside a line matches any text on
  that line. A last line ``[exit N]`` expects exit status N (default 0).
* ``willitscale ...`` runs in-process; ``python ...`` runs with this interpreter. Commands run in
  a scratch folder per page that holds a link to ``examples/``, 80 columns wide.
* ```` ```python ```` blocks of a page run in order in one namespace and must not raise;
  ```` ```pycon ```` blocks are doctests (ELLIPSIS, NORMALIZE_WHITESPACE) in that namespace.
* ``<!-- docs-test: skip REASON -->`` on the line before a block skips it (GPUs, root, ...).
  Any other fence (```` ``` ````, ```` ```sh ````, ```` ```toml ````) is not run.
"""

from __future__ import annotations

import contextlib
import difflib
import io
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
SKIP = re.compile(r"<!--\s*docs-test:\s*skip\s*(.*?)\s*-->")
EXIT = re.compile(r"\[exit (\d+)\]")


@dataclass(frozen=True)
class Block:
    page: str  #: file name under docs/
    line: int  #: line of the opening fence
    lang: str
    text: str
    skip: str | None  #: reason, when marked to skip


def blocks(path: Path) -> list[Block]:
    """The fenced blocks of a Markdown page, with their language and skip marks."""
    out, lines = [], path.read_text(encoding="utf-8").splitlines()
    i = 0
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        indent, lang, start = m.group(1), m.group(2), i
        body = []
        i += 1
        while i < len(lines) and not re.match(rf"^{indent}```\s*$", lines[i]):
            body.append(lines[i][len(indent):] if lines[i].startswith(indent) else lines[i])
            i += 1
        before = lines[start - 1] if start > 0 else ""
        skip = SKIP.search(before)
        out.append(Block(page=path.name, line=start + 1, lang=lang, text="\n".join(body),
                         skip=(skip.group(1) or "marked skip") if skip else None))
        i += 1
    return out


def commands(text: str) -> list[tuple[str, list[str]]]:
    """``(command, expected output lines)`` pairs of a console block."""
    pairs: list[tuple[str, list[str]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if not lines[i].startswith("$ "):
            if pairs:
                pairs[-1][1].append(lines[i])
            elif lines[i].strip():
                raise AssertionError(f"output before any '$ ' command: {lines[i]!r}")
            i += 1
            continue
        command = lines[i][2:]
        while command.rstrip().endswith("\\") and i + 1 < len(lines):
            i += 1
            command = command.rstrip()[:-1].rstrip() + " " + lines[i].strip()
        pairs.append((command, []))
        i += 1
    return pairs


def _pattern(expected: list[str]) -> re.Pattern:
    parts = []
    for line in expected:
        if line.strip() == "...":
            parts.append(r"(?:[^\n]*\n)*?")
        else:
            parts.append(".*?".join(re.escape(p) for p in line.rstrip().split("...")) + r"\n")
    return re.compile("".join(parts), re.S if False else 0)


def matches(expected: list[str], actual: str) -> bool:
    """Whether ``actual`` is what ``expected`` says, under the rules of the module docstring."""
    def trim(lines):
        lines = [x.rstrip() for x in lines]
        while lines and not lines[0]:
            lines.pop(0)
        while lines and not lines[-1]:
            lines.pop()
        return lines

    exp = trim(expected)
    act = trim(actual.splitlines())
    text = "".join(x + "\n" for x in act)
    return _pattern(exp).fullmatch(text) is not None


def _run_willitscale(argv: list[str]) -> tuple[int, str]:
    from willitscale.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse --help / usage errors
            code = exc.code if isinstance(exc.code, int) else 1
    return code, out.getvalue() + err.getvalue()


def _run_python(argv: list[str], cwd: Path) -> tuple[int, str]:
    env = {**os.environ, "COLUMNS": "80", "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, *argv], cwd=cwd, capture_output=True, text=True,
                          timeout=300, env=env)
    return proc.returncode, proc.stdout + proc.stderr


def run_command(command: str, cwd: Path) -> tuple[int, str]:
    argv = shlex.split(command, comments=True)
    if not argv:
        raise AssertionError(f"empty command: {command!r}")
    if argv[0] == "willitscale":
        return _run_willitscale(argv[1:])
    if argv[0] in ("python", "python3"):
        return _run_python(argv[1:], cwd)
    raise AssertionError(f"{argv[0]!r}: only willitscale and python commands run in docs; fence "
                         "the block as ```sh to show it without running it")


PAGES = sorted(DOCS.glob("*.md"))
CONSOLE = [b for p in PAGES for b in blocks(p) if b.lang == "console"]
PY_PAGES = [p for p in PAGES if any(b.lang in ("python", "pycon") for b in blocks(p))]


@pytest.fixture(scope="session")
def page_dirs(tmp_path_factory):
    made: dict[str, Path] = {}

    def get(page: str) -> Path:
        if page not in made:
            d = tmp_path_factory.mktemp(page.replace(".", "_"))
            (d / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
            made[page] = d
        return made[page]

    return get


@pytest.fixture
def in_page_dir(monkeypatch, page_dirs):
    def enter(page: str) -> Path:
        d = page_dirs(page)
        monkeypatch.chdir(d)
        monkeypatch.setenv("COLUMNS", "80")
        return d

    return enter


@pytest.mark.parametrize("block", CONSOLE, ids=[f"{b.page}:{b.line}" for b in CONSOLE])
def test_console_block(block: Block, in_page_dir):
    if block.skip:
        pytest.skip(block.skip)
    cwd = in_page_dir(block.page)
    for command, expected in commands(block.text):
        want = 0
        if expected and EXIT.fullmatch(expected[-1].strip()):
            want = int(EXIT.fullmatch(expected[-1].strip()).group(1))
            expected = expected[:-1]
        code, output = run_command(command, cwd)
        where = f"docs/{block.page}:{block.line}: $ {command}"
        assert code == want, f"{where}\nexit {code} (expected {want})\n{output}"
        if expected and not matches(expected, output):
            diff = "\n".join(difflib.unified_diff(expected, output.splitlines(), "docs", "actual",
                                                  lineterm=""))
            pytest.fail(f"{where}\noutput differs ('...' elides):\n{diff}")


@pytest.mark.parametrize("page", PY_PAGES, ids=[p.name for p in PY_PAGES])
def test_python_blocks(page: Path, in_page_dir):
    import doctest

    in_page_dir(page.name)
    namespace: dict = {"__name__": "__docs__"}
    for block in blocks(page):
        if block.lang not in ("python", "pycon") or block.skip:
            continue
        where = f"docs/{page.name}:{block.line}"
        if block.lang == "python":
            exec(compile(block.text, where, "exec"), namespace)  # noqa: S102 - our own docs
            continue
        test = doctest.DocTestParser().get_doctest(block.text, namespace, where, where, block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        report = io.StringIO()
        runner.run(test, out=report.write)
        assert runner.failures == 0, report.getvalue()
        namespace.update(test.globs)


# -- the runner's own rules --------------------------------------------------------------------

def test_matching_rules():
    assert matches(["a", "...", "d"], "a\nb\nc\nd\n")
    assert matches(["a", "...", "b"], "a\nb")  # '...' may match nothing
    assert matches(["step 983 ms · ... tokens/s"], "step 983 ms · 133,289 tokens/s   \n\n")
    assert not matches(["a", "b"], "a\nc\n")
    assert not matches(["a"], "a\nextra\n")  # no silent trailing output
    assert not matches(["x ... y"], "x 1\n2 y\n")  # in-line '...' stays on its line


def test_commands_parse_continuations_comments_and_outputs():
    pairs = commands("$ willitscale a \\\n    --b 1   # note\nout 1\nout 2\n$ willitscale c")
    assert pairs == [("willitscale a --b 1   # note", ["out 1", "out 2"]), ("willitscale c", [])]
    assert shlex.split(pairs[0][0], comments=True) == ["willitscale", "a", "--b", "1"]
