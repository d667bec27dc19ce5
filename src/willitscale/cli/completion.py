"""``willitscale completion bash|zsh``: a shell completion script, made from the parser itself.

The script is static: every command path (``results import-nccl-tests``), its flags and the
values of flags that take a fixed set (``--network analytic|flow``) are read from the argparse
parser when the script is printed, so it never falls behind the CLI and completing starts no
Python. Flags whose value is free (a size, a file) complete to files, as the shell would.
zsh runs the bash script through ``bashcompinit``.
"""

from __future__ import annotations

import argparse

HELP = "a shell completion script (bash, zsh) for willitscale's commands, flags and choices"

DESCRIPTION = """\
Print a completion script for your shell. Load it for this session, or for good:

  source <(willitscale completion bash)            # bash, now
  willitscale completion bash > ~/.local/share/bash-completion/completions/willitscale
  willitscale completion zsh > "${fpath[1]}/_willitscale"   # zsh

The script lists the commands, sub-commands, flags and the values of flags with a fixed set of
choices as this version of willitscale defines them; print it again after an upgrade."""

SHELLS = ("bash", "zsh")


def register(subparsers) -> None:
    from willitscale.cli.helptext import examples

    p = subparsers.add_parser("completion", help=HELP, description=DESCRIPTION, epilog=examples(
        "willitscale completion bash", "willitscale completion zsh"))
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(run=run)


def run(args) -> int:
    from willitscale.cli.main import build_parser

    print(completion_script(build_parser(), args.shell, catalog_names()), end="")
    return 0


def catalog_names() -> dict[str, list[str]]:
    """Flag -> the catalog names it takes (completed next to file names: a flag such as
    ``--model`` also takes a path)."""
    import willitscale as wis

    gpus = [g.name for g in wis.list_gpus()]
    nodes = [n.name for n in wis.list_nodes()]
    links = [link.name for link in wis.list_links()]
    return {"--model": [m.name for m in wis.list_models()], "--gpu": gpus, "--preset": nodes,
            "--node": nodes, "--intra-node": links, "--inter-node": links}


def command_table(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> dict:
    """``{path: (sub-commands, flags, {flag: choices})}`` for every command path of ``parser``."""
    subs: list[str] = []
    flags: list[str] = []
    choices: dict[str, list[str]] = {}
    table: dict = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                subs.append(name)
                table |= command_table(sub, (*path, name))
        elif action.option_strings:
            flags += [o for o in action.option_strings if o.startswith("--") or len(o) == 2]
            if action.choices is not None:
                for option in action.option_strings:
                    choices[option] = [str(c) for c in action.choices]
    table[path] = (subs, flags, choices)
    return table


def _word(text: str) -> str:
    """``text`` as one single-quoted shell word."""
    return "'" + text.replace("'", "'\\''") + "'"


def bash_script(parser: argparse.ArgumentParser, names: dict[str, list[str]] | None = None) -> str:
    """The bash script; ``names`` (flag -> catalog names) completes those flags' values."""
    table = command_table(parser)
    lines = [
        "# bash completion for willitscale (made by `willitscale completion bash`)",
        "_willitscale() {",
        "    local cur prev path word i",
        '    cur="${COMP_WORDS[COMP_CWORD]}"',
        '    prev="${COMP_WORDS[COMP_CWORD-1]}"',
        '    path=""',
        "    for ((i = 1; i < COMP_CWORD; i++)); do",
        '        word="${COMP_WORDS[i]}"',
        '        case "$path/$word" in',
    ]
    known = sorted("/".join(p) for p in table if p)
    lines += [f"            {_word('/' + k)}) path={_word('/' + k)} ;;" for k in known]
    lines += [
        "        esac",
        "    done",
        '    local subs="" flags="" values=""',
        '    case "$path" in',
    ]
    for path, (subs, flags, choices) in sorted(table.items()):
        key = "/" + "/".join(path) if path else ""
        lines.append(f"        {_word(key)})")
        lines.append(f"            subs={_word(' '.join(subs))}; flags={_word(' '.join(flags))}")
        if choices:
            lines.append('            case "$prev" in')
            for option, values in sorted(choices.items()):
                lines.append(f"                {_word(option)}) values={_word(' '.join(values))} ;;")
            lines.append("            esac")
        lines.append("            ;;")
    lines += ["    esac", '    if [[ -z "$values" ]]; then', '        case "$prev" in']
    for option, words in sorted((names or {}).items()):
        lines.append(f"            {_word(option)}) COMPREPLY=($(compgen -W {_word(' '.join(words))} "
                     '-- "$cur") $(compgen -f -- "$cur")); return ;;')
    lines += [
        "        esac",
        "    fi",
        '    if [[ -n "$values" ]]; then',
        '        COMPREPLY=($(compgen -W "$values" -- "$cur"))',
        '    elif [[ "$cur" == -* ]]; then',
        '        COMPREPLY=($(compgen -W "$flags" -- "$cur"))',
        '    elif [[ -n "$subs" ]]; then',
        '        COMPREPLY=($(compgen -W "$subs" -- "$cur"))',
        "    else",
        '        COMPREPLY=($(compgen -f -- "$cur"))',
        "    fi",
        "}",
        "complete -o filenames -F _willitscale willitscale",
        "",
    ]
    return "\n".join(lines)


def completion_script(parser: argparse.ArgumentParser, shell: str,
                      names: dict[str, list[str]] | None = None) -> str:
    """The completion script for ``shell`` (one of :data:`SHELLS`)."""
    script = bash_script(parser, names)
    if shell == "zsh":
        return ("#compdef willitscale\n# zsh: the bash completion through bashcompinit\n"
                "autoload -U +X bashcompinit && bashcompinit\n" + script)
    return script
