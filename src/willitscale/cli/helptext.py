"""How ``--help`` reads: the top-level overview (commands grouped by job, what each answers),
paragraphs wrapped to the terminal, and an ``examples:`` section in every command's help.

The one-line summaries shown by ``willitscale --help`` live here, in one list (as git keeps its
``command-list.txt``), so the overview reads as one text; a command missing from :data:`GROUPS`
is still listed, under "Other", with the ``help=`` its module gives.
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from collections.abc import Iterable

__all__ = ["GROUPS", "EXAMPLES", "HelpFormatter", "examples", "overview"]

#: (heading, ((command, what it answers), ...)) in the order a newcomer needs them
GROUPS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Predict (the main job)", (
        ("estimate", "how long one training step takes, where the time goes, its MFU and memory "
                     "per GPU, and what limits it"),
        ("scale", "how step time and efficiency change from 1 to N nodes; where communication "
                  "overtakes compute"),
        ("plan", "which parallel plan (DP/TP/PP/CP/EP, ZeRO, micro-batch, recompute) runs "
                 "fastest within memory, and why"),
        ("requirements", "what inter-node bandwidth keeps communication hidden behind compute"),
        ("size", "how many GPUs train a model within a deadline; the fewest that hold it"),
        ("report", "one HTML file to share: verdict, breakdown, scaling, network, what would "
                   "change the verdict"),
    )),
    ("Inspect the hardware, the model, a collective, a fabric", (
        ("hardware", "what the catalog says about a GPU, link, NVSwitch or node, with sources"),
        ("model", "a transformer's parameters, training FLOPs per token and memory"),
        ("collective", "how long one collective takes under each algorithm; its algbw and busbw"),
        ("fabric", "what traffic really gets on a shared fabric: link loads, ECMP collisions, "
                   "incast"),
        ("sweep", "a grid of fabric simulations or estimates on every core or a Ray cluster, to "
                  "CSV or Parquet, resumable"),
    )),
    ("Set up", (
        ("completion", "a shell completion script (bash, zsh) for the commands, flags and "
                       "catalog names"),
    )),
    ("Measure, calibrate, validate", (
        ("discover", "this node's GPUs, NVLink, NICs and NUMA layout, as a node preset; what "
                     "looks wrong"),
        ("trace", "what a profiled training step did: compute by kind, collectives, overlap "
                  "(a torch.profiler trace)"),
        ("bench", "what this cluster achieves: collective busbw, matmul FLOP/s, a DDP step"),
        ("results", "the runs measured so far: list, show, compare repeats, export"),
        ("emulate", "an emulated cluster of network namespaces with shaped links (root)"),
        ("calibrate", "the link and compute figures that fit the stored measurements"),
        ("validate", "how far the model's predictions are from the measurements"),
    )),
)

#: the top-level help's examples
EXAMPLES = (
    "willitscale estimate --model gpt2-xl --preset dgx-a100 --nodes 4 --micro-batch 4",
    "willitscale scale examples/handbook-2b-4nodes.toml --nodes 1..16",
    "willitscale plan --model gpt3-175b --gpu a100-80gb --gpus 1024 --gpus-per-node 8 "
    "--inter-node 8x200Gbps --global-batch 1536 --seq-len 2048",
    "willitscale report examples/handbook-2b-4nodes.toml --html report.html",
)


def _width() -> int:
    """argparse's own choice: the terminal's columns (COLUMNS when set) minus 2."""
    return max(shutil.get_terminal_size().columns - 2, 40)


def _command_lines(commands: Iterable[tuple[str, str]], width: int, name_width: int) -> list[str]:
    lines = []
    for name, text in commands:
        body = textwrap.wrap(text, max(width - name_width - 4, 20), break_on_hyphens=False)
        lines.append(f"  {name:<{name_width}}  {body[0] if body else ''}")
        lines += [" " * (name_width + 4) + more for more in body[1:]]
    return lines


def overview(subparsers: argparse._SubParsersAction) -> str:
    """The registered commands, grouped by job, each with what it answers (for the top-level
    ``--help``); commands not in :data:`GROUPS` come last, with their own ``help=``."""
    helps = {a.dest: a.help or "" for a in subparsers._choices_actions}
    width = _width()
    name_width = max(len(n) for n in helps)
    known = {name for _, commands in GROUPS for name, _ in commands}
    sections = [(title, [(n, t) for n, t in commands if n in helps]) for title, commands in GROUPS]
    others = [(n, helps[n]) for n in helps if n not in known]
    if others:
        sections.append(("Other", others))
    out = []
    for title, commands in sections:
        if commands:
            out += [f"{title}:", *_command_lines(commands, width, name_width), ""]
    return "\n".join(out).rstrip()


def examples(*commands: str) -> str:
    """An ``examples:`` section for a parser's epilog: each command on its own line, a long one
    continued with ``\\`` (copy-pastable into a shell)."""
    width = _width()
    lines = ["examples:"]
    for command in commands:
        words, line = _flag_values(command.split(" ")), "  $"
        for word in words:
            if len(line) + 1 + len(word) > width - 2 and line.strip() != "$":
                lines.append(line + " \\")
                line = "     "
            line += " " + word
        lines.append(line)
    return "\n".join(lines)


def _flag_values(words: list[str]) -> list[str]:
    """``["--nodes", "4"]`` -> ``["--nodes 4"]``: a flag and its value stay on one line."""
    out: list[str] = []
    for word in words:
        if out and out[-1].startswith("-") and " " not in out[-1] and not word.startswith("-"):
            out[-1] += " " + word
        else:
            out.append(word)
    return out


class HelpFormatter(argparse.HelpFormatter):
    """argparse's formatter, but a description or epilog keeps its paragraphs: blank lines
    separate paragraphs, each re-wrapped to the terminal, and indented lines (examples, lists)
    are kept as written."""

    def _fill_text(self, text, width, indent):
        out = []
        for para in textwrap.dedent(text).strip("\n").split("\n\n"):
            lines = para.split("\n")
            if any(line.startswith((" ", "$")) for line in lines[1:]) or para.endswith(":") \
                    or lines[0].startswith(" "):
                out.append("\n".join(indent + line for line in lines))
            else:
                out.append(textwrap.fill(" ".join(lines), width, initial_indent=indent,
                                         subsequent_indent=indent, break_on_hyphens=False))
        return "\n\n".join(out)
