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
