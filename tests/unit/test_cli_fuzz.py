"""CLI fuzz test (issue 17, "Must" 1): bad values for every flag of every command, in-process.

The cases are generated from the argparse parsers themselves (every optional flag that takes a
value, of every command and sub-command) crossed with values no flag should take -- text where a
number belongs, NaN, infinity, an overflowing exponent, a negative number with a unit, an empty
string, a choice that is not one -- plus the malformed inputs issue 17 listed by hand. Each case
runs on a valid base command for its command, so the bad value is the only thing wrong.

What must hold for every case (the contract of ``willitscale.cli.main``):

* exit 2 (usage) names the flag or key and the value, on stderr; exit 1 (environment, I/O) says
  what failed; exit 0 (the value was valid after all, or a warning) prints no NaN or infinity;
* never a Python traceback, never "internal error" (exit 3), never an exit code outside 0-2.

Expensive commands (a benchmark launching ranks, ``emulate`` making network namespaces) get only
values their parser must refuse before anything starts, so the whole file stays within seconds
per hundred cases.
"""

from __future__ import annotations

import argparse
import math
import re

import pytest

from willitscale.cli.main import build_parser

#: a valid command per leaf command: the base every case adds one bad flag to ("{tmp}" is the
#: test's temporary folder). None: the command is only given values its parser must refuse.
BASE: dict[str, tuple[str, ...] | None] = {
    "estimate": ("estimate", "--model", "gpt2", "--gpu", "a100", "--nodes", "2"),
    "scale": ("scale", "--model", "gpt2", "--gpu", "a100", "--nodes", "1,2"),
    "plan": ("plan", "--model", "gpt2", "--gpu", "a100", "--global-batch", "16"),
    "requirements": ("requirements", "--model", "gpt2", "--gpu", "a100", "--nodes", "2"),
    "size": ("size", "--params", "7e9", "--tokens", "1e12", "--gpu", "a100", "--days", "30",
             "--utilization", "0.4"),
    "report": None,  # an HTML report takes seconds: parser-level values only
    "hardware list": ("hardware", "list"),
    "hardware show": ("hardware", "show", "a100"),
    "model": ("model", "gpt2"),
    "collective": ("collective", "all_reduce", "--size", "1GB", "--ranks", "8"),
    "fabric build": ("fabric", "build", "fat-tree", "--k", "4"),
    "fabric show": None,
    "fabric sizes": ("fabric", "sizes", "--radix", "64"),
    "fabric simulate": None,
    "bench collectives": None,
    "bench matmul": None,
    "bench train": None,
    "results list": ("results", "list"),
    "results show": ("results", "show"),
    "results compare": ("results", "compare"),
    "results export": ("results", "export"),
    "results import": None,
    "results salvage": None,
    "emulate": None,
    "calibrate": ("calibrate",),
    "validate": ("validate",),
}

#: values no numeric flag takes, and what each tests
NUMERIC_NONSENSE = ("abc", "nan", "inf", "-inf", "1e400", "-1e-30Gbps", "", "1..", "0x")
#: values no name-like flag takes
NAME_NONSENSE = ("no-such-thing-xyz", "", "[/]", "x" * 300)


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield " ".join(path), parser
        return
    for name, sub in subs[0].choices.items():
        yield from _leaves(sub, (*path, name))


def _value_flags(parser: argparse.ArgumentParser):
    for action in parser._actions:
        if not action.option_strings or action.nargs == 0:
            continue
        if isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            continue
        yield action


def _is_path(action) -> bool:
    words = f"{action.dest} {action.metavar or ''}".lower()
    return any(w in words for w in ("file", "dir", "html", "trace", "output", "plot", "path",
                                    "scenario", "calibration", "csv", "json_out", "profile"))


#: the nonsense sets are rotated over the flags (one name or two numeric values per flag), so
#: every value meets many flags and the file stays near 500 cases

def _bad_values(action, turn: int) -> tuple[str, ...]:
    if action.choices is not None:
        return ("not-a-choice",)
    if _is_path(action):
        return ("/nonexistent-willitscale-dir/x",)
    if action.type in (None, str):
        return (NAME_NONSENSE[turn % len(NAME_NONSENSE)],)
    # numbers are refused by the parser or the first check: cheap, so two values each
    return tuple(NUMERIC_NONSENSE[(2 * turn + k) % len(NUMERIC_NONSENSE)] for k in range(2))


def _cases():
    cases, turn = [], 0
    for name, parser in _leaves(build_parser()):
        base = BASE.get(name, None)
        for action in _value_flags(parser):
            flag = max(action.option_strings, key=len)
            names = action.type in (None, str) and action.choices is None
            if base is None and names:
                continue  # a name or path the parser cannot judge: the command would start
            for value in _bad_values(action, turn):
                cases.append(pytest.param(name, base, flag, value,
                                          id=f"{name}:{flag}={value[:20]!r}"))
            turn += 1
    return cases


#: issue 17's table of malformed inputs, by hand (argv, with "{tmp}" for the temporary folder)
LISTED = [
    ("estimate", "--model", "gpt2", "--gpu", "a100", "--trace", "/dev/full"),
    ("estimate", "--model", "x" * 5000, "--gpu", "a100"),
    ("calibrate", "--op", "bogus"),
    ("estimate", "--model", "gpt2", "--gpu", "a100", "--inter-node", "1e-30Gbps"),
    ("plan", "--model", "gpt2", "--gpu", "a100", "--global-batch", "0"),
    ("scale", "--model", "gpt2", "--gpu", "a100", "--nodes", "1..100000000"),
    ("collective", "all_reduce", "--size", "1GB", "--ranks", "1e12"),
    ("estimate", "--model", "gpt2", "--gpu", "a100", "--gpu-memory", "80Gb"),
    ("plan", "--model", "gpt2", "--gpu", "a100", "--global-batch", "16", "--tp", "1,,2"),
    ("requirements", "--model", "gpt2", "--gpu", "a100", "--nodes", "2,,4"),
    ("estimate", "--model", "gpt2", "--gpu", "a100", "--inter-node", "1EB/s"),
    ("estimate", "--model", "gpt2", "--gpu", "a100", "--micro-batch", "-2"),
    ("estimate", "--model", "gpt2", "--gpu", "a100", "--inter-node", "-200Gbps"),
    ("estimate", "--model", "gpt2", "--gpu", "a100", "--seq-len", "-1e3"),
    ("results", "show", "--plot", "{tmp}/figs", "99"),
]

#: a NaN or an infinity printed as a number (prose such as "infinity" or "information" is not)
_NAN = re.compile(r"(?<![\w.-])-?(?i:nan|inf)(?![\w-])|:\s*(NaN|-?Infinity)\b")


def _normal(text: str) -> str:
    return text.lower().replace("_", "-").lstrip("-")


def _check(code: int, out: str, err: str, *, flag: str | None = None, value: str | None = None):
    assert "Traceback" not in err and "Traceback" not in out, err
    assert "internal error" not in err, err
    assert code in (0, 1, 2), (code, err)
    if code == 0:
        assert not _NAN.search(out), out[:2000]
        return
    assert err.strip(), "an error exit with nothing on stderr"
    if code == 2 and flag is not None:
        said = _normal(err)
        named = _normal(flag) in said or _normal(flag).replace("-", " ") in said or \
            _normal(flag).replace("-", "_") in err.lower()
        shown = value in ("", None) or value[:40] in err or repr(value)[:40] in err
        assert named or shown, (flag, value, err)


@pytest.fixture(autouse=True)
def _private_home(tmp_path, monkeypatch):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "home"))


@pytest.fixture
def run(cli, capsys):
    """``cli`` that also takes argparse's own exit (``SystemExit(2)`` with its usage message)."""
    def go(*argv):
        try:
            return cli(*argv)
        except SystemExit as exc:
            captured = capsys.readouterr()
            return int(exc.code or 0), captured.out, captured.err
    return go


@pytest.mark.parametrize("name, base", [(n, b) for n, b in BASE.items() if b is not None])
def test_every_base_command_is_valid(run, name, base):
    code, out, err = run(*base)
    # an empty store is an environment error (exit 1); listing or exporting it is not an error
    empty_store = name in ("results show", "results compare", "calibrate", "validate")
    assert code == (1 if empty_store else 0), err
    _check(code, out, err)


@pytest.mark.parametrize("name, base, flag, value", _cases())
def test_bad_flag_values(run, tmp_path, name, base, flag, value):
    argv = (*(base or tuple(name.split())), flag, value)
    argv = tuple(a.replace("{tmp}", str(tmp_path)) for a in argv)
    code, out, err = run(*argv)
    _check(code, out, err, flag=flag, value=value)
    if base is None or value == "":  # only values its parser must refuse were given
        assert code == 2, (argv, err)
    if value in NUMERIC_NONSENSE and value not in ("",) and code == 0:
        pytest.fail(f"{flag} {value!r} was accepted: {out[:300]}")


@pytest.mark.parametrize("argv", LISTED, ids=[" ".join(a)[:60] for a in LISTED])
def test_listed_malformed_inputs(run, tmp_path, argv):
    argv = tuple(a.replace("{tmp}", str(tmp_path)) for a in argv)
    code, out, err = run(*argv)
    _check(code, out, err)
    assert code != 0, f"accepted: {' '.join(argv)[:200]}"


def test_enough_cases():
    # the floor: at least 400 generated cases across every command
    cases = _cases()
    assert len(cases) + len(LISTED) >= 400
    assert {c.values[0] for c in cases} >= {n for n in BASE if n not in ("fabric show",
                                                                         "results import",
                                                                         "results salvage")}


def test_nan_detector_matches_what_it_should():
    assert _NAN.search("step nan s") and _NAN.search("MFU inf") and _NAN.search("-inf")
    assert _NAN.search('{"mfu": NaN}') and _NAN.search('{"x": -Infinity}')
    assert not _NAN.search("information") and not _NAN.search("nanoseconds 5 ns")
    assert not _NAN.search("AMD Infinity Fabric")
    assert math.isnan(float("nan"))
