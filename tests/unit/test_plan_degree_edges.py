"""Degrees and search values are validated at the edge: a clear error, never an internal one."""

import pytest

from willitscale.errors import ConfigError
from willitscale.plan.search import SearchSpace

ESTIMATE = ("estimate", "--model", "gpt2", "--gpu", "a100-80gb", "--nodes", "1",
            "--gpus-per-node", "8")
PLAN = ("plan", "--model", "gpt2", "--gpu", "a100-80gb", "--gpus", "8", "--global-batch", "8")


@pytest.mark.parametrize("flag", ["--tp", "--pp", "--cp", "--ep", "--dp"])
def test_a_zero_degree_is_a_config_error_naming_it(cli, flag):
    # a degree of 0 used to reach `gpus % (tp * pp * cp)` and die with ZeroDivisionError (exit 3)
    code, _, err = cli(*ESTIMATE, flag, "0")
    assert code == 2 and "internal error" not in err
    assert f"{flag[2:]} = 0 is not valid" in err


def test_a_zero_degree_in_a_scenario_file_too(cli, tmp_path):
    path = tmp_path / "s.toml"
    path.write_text("[parallel]\ntp = 0\n")
    code, _, err = cli("estimate", str(path), "--model", "gpt2", "--gpu", "a100-80gb")
    assert code == 2 and "tp = 0 is not valid" in err


@pytest.mark.parametrize("flag, value, says", [
    ("--tp", "0,2", ">= 1"), ("--pp", "0", ">= 1"), ("--virtual-stages", "1", ">= 2"),
    ("--zero", "5", "0, 1, 2, 3"), ("--tp", "3", "divisors of the 8 GPUs")])
def test_search_values_are_checked(cli, flag, value, says):
    code, _, err = cli(*PLAN, flag, value)
    assert code == 2 and says in err and "internal error" not in err


def test_search_space_rejects_impossible_values():
    with pytest.raises(ConfigError, match="virtual_stages"):
        SearchSpace(virtual_stages=(1,))  # one chunk per stage is not interleaving
    with pytest.raises(ConfigError, match="zero"):
        SearchSpace(zero=(4,))
