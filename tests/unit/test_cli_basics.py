def test_version(cli, capsys):
    import pytest

    with pytest.raises(SystemExit) as info:
        cli("--version")
    assert info.value.code == 0
    assert "willitscale" in capsys.readouterr().out


def test_unknown_command_is_a_usage_error(cli, capsys):
    import pytest

    with pytest.raises(SystemExit) as info:
        cli("no-such-command")
    assert info.value.code == 2
    assert "invalid choice" in capsys.readouterr().err
