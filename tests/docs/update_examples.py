"""Refresh the expected output of the docs' console blocks after the model changed.

    python tests/docs/update_examples.py docs/tutorial.md [docs/estimate.md ...]

For each command of each ```console block, runs it (as the docs test does) and rewrites every
shown output line with the actual line it stands for, keeping the page's ``...`` elisions: a
line right after a command or a shown line is the next actual line; a line after ``...`` is the
most similar actual line further on. Lines whose in-line ``...`` still match are kept. Review
the result with ``git diff``: numbers in the prose around the blocks are not touched.
"""

from __future__ import annotations

import difflib
import os
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from test_docs_examples import ROOT, _pattern, commands, run_command  # noqa: E402


def refreshed(expected: list[str], actual: list[str]) -> list[str]:
    out, j, after_gap = [], 0, False
    for line in expected:
        if line.strip() == "..." or re.fullmatch(r"\[exit \d+\]", line.strip()):
            out.append(line)
            after_gap = after_gap or line.strip() == "..."
            continue
        if j >= len(actual):
            out.append(line)
            continue
        if after_gap:
            k = max(range(j, len(actual)), key=lambda i: (difflib.SequenceMatcher(
                None, line, actual[i]).ratio(), -i))
        else:
            k = j
        keep = "..." in line and _pattern([line]).fullmatch(actual[k] + "\n")
        out.append(line if keep else actual[k])
        j, after_gap = k + 1, False
    return out


def update_page(path: Path, cwd: Path) -> int:
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    changed = 0
    i = 0
    while i < len(lines):
        if lines[i].strip() != "```console":
            i += 1
            continue
        end = next(k for k in range(i + 1, len(lines)) if lines[k].strip() == "```")
        block = lines[i + 1:end]
        new_block, pos = [], 0
        for command, expected in commands("\n".join(block)):
            # copy the command's own lines (with continuations) verbatim
            first = pos
            while not block[pos].startswith("$ "):
                pos += 1
            while block[pos].rstrip().endswith("\\"):
                pos += 1
            pos += 1
            new_block += block[first:pos]
            _, output = run_command(command, cwd)
            actual = [x.rstrip() for x in output.splitlines()]
            while actual and not actual[-1]:
                actual.pop()
            fresh = refreshed(expected, actual) if expected else []
            changed += fresh != expected
            new_block += fresh
            pos += len(expected)
        lines[i + 1:end] = new_block
        i = i + 1 + len(new_block) + 1
    path.write_text("\n".join(lines) + ("\n" if text.endswith("\n") else ""), encoding="utf-8")
    return changed


def main(argv: list[str]) -> int:
    os.environ["COLUMNS"] = "80"
    with tempfile.TemporaryDirectory() as tmp:
        cwd = Path(tmp)
        (cwd / "examples").symlink_to(ROOT / "examples", target_is_directory=True)
        os.chdir(cwd)
        for name in argv:
            page = (ROOT / name) if not Path(name).is_absolute() else Path(name)
            print(f"{name}: {update_page(page, cwd)} command output(s) refreshed")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
