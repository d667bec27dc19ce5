"""Shared fixtures. Tests never touch the user's real results store."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path, monkeypatch):
    monkeypatch.setenv("WILLITSCALE_HOME", str(tmp_path / "willitscale-home"))


@pytest.fixture
def cli(capsys):
    """Run the CLI in-process: ``code, out, err = cli("model", "gpt2", "--json")``."""
    from willitscale.cli.main import main

    def run(*argv: str):
        code = main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture
def terminal():
    """Start commands as a terminal starts a foreground job, and press Ctrl-C on them.

    ``proc = terminal([...], **popen_kwargs)`` starts the command in its own process group with
    SIGINT at its default action (a suite run in the background of a non-interactive shell
    inherits SIGINT *ignored*, and Python keeps it ignored: a Ctrl-C test would then test
    nothing but a timeout). ``terminal.ctrl_c(proc)`` sends SIGINT to the whole group, as a
    terminal does; ``proc.send_signal(SIGINT)`` reaches the command alone (``kill -INT``).
    Whatever is still running in the groups at the end of the test is killed.
    """
    import os
    import signal
    import subprocess

    started: list[subprocess.Popen] = []

    def start(argv, **kwargs) -> subprocess.Popen:
        proc = subprocess.Popen(argv, process_group=0,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
                                **kwargs)
        started.append(proc)
        return proc

    start.ctrl_c = lambda proc: os.killpg(proc.pid, signal.SIGINT)
    yield start
    for proc in started:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait()
