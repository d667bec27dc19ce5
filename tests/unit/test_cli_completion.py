"""``willitscale completion bash``: the script, sourced in a real bash, completes what the parser
defines (commands, sub-commands, flags, fixed choices, catalog names)."""

from __future__ import annotations

import argparse
import shutil
import subprocess

import pytest

import willitscale as wis
from willitscale.cli.main import COMMAND_MODULES, build_parser, main

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")


@pytest.fixture(scope="module")
def script(tmp_path_factory):
    path = tmp_path_factory.mktemp("completion") / "willitscale.bash"
    with pytest.MonkeyPatch.context() as mp:
        captured = []
        mp.setattr("builtins.print", lambda *a, **k: captured.append(a[0]))
        assert main(["completion", "bash"]) == 0
    path.write_text("".join(captured))
    return path


def complete(script, *words: str) -> list[str]:
    """COMPREPLY for the command line ``willitscale WORDS`` (the last word being completed)."""
    quoted = " ".join("'" + w + "'" for w in ("willitscale", *words))
    program = (f"source '{script}'; COMP_WORDS=({quoted}); COMP_CWORD=$((${{#COMP_WORDS[@]}}-1)); "
               "COMPREPLY=(); _willitscale; printf '%s\\n' \"${COMPREPLY[@]}\"")
    out = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True,
                         cwd=script.parent)
    return [line for line in out.stdout.splitlines() if line]


def _sub(parser: argparse.ArgumentParser, *path: str) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


def test_first_word_completes_to_every_command(script):
    assert sorted(complete(script, "")) == sorted(COMMAND_MODULES)
    assert complete(script, "res") == ["results"]


def test_sub_commands_and_their_flags(script):
    results = _sub(build_parser(), "results")
    subs = next(a for a in results._actions if isinstance(a, argparse._SubParsersAction)).choices
    assert complete(script, "results", "im") == [n for n in subs if n.startswith("im")]
    nccl = _sub(build_parser(), "results", "import-nccl-tests")
    flags = {o for a in nccl._actions for o in a.option_strings if o.startswith("--")}
    assert set(complete(script, "results", "import-nccl-tests", "--")) == flags


def test_flag_with_fixed_choices_completes_to_them(script):
    estimate = _sub(build_parser(), "estimate")
    network = next(a for a in estimate._actions if "--network" in a.option_strings)
    assert complete(script, "estimate", "--network", "") == list(network.choices)


def test_catalog_flags_complete_to_catalog_names_and_files(script):
    (script.parent / "h100-config.json").write_text("{}")
    got = complete(script, "estimate", "--gpu", "h100")
    names = [g.name for g in wis.list_gpus() if g.name.startswith("h100")]
    assert got == names + ["h100-config.json"] and names


def test_zsh_script_is_the_bash_one_through_bashcompinit(script, capsys):
    assert main(["completion", "zsh"]) == 0
    zsh = capsys.readouterr().out
    assert zsh.startswith("#compdef willitscale\n") and "bashcompinit" in zsh
    assert zsh.endswith(script.read_text())
