import pytest

from willitscale.config import Table, load_toml
from willitscale.errors import (
    ConfigError,
    Infeasible,
    UnknownNameError,
    WillItScaleError,
)
from willitscale.units import parse_bandwidth


def test_unknown_name_suggests_closest():
    err = UnknownNameError("GPU", "h100sxm", ["h100-sxm", "h100-pcie", "a100-80gb"])
    assert "h100-sxm" in str(err)
    assert isinstance(err, ConfigError) and isinstance(err, WillItScaleError)


def test_unknown_name_without_close_match_lists_known():
    err = UnknownNameError("GPU", "zzz", ["a100-80gb", "h100-sxm"])
    assert "a100-80gb" in str(err) and "h100-sxm" in str(err)


def test_infeasible_carries_reason_and_exit_code():
    err = Infeasible("out_of_memory", "needs 120 GB per GPU, has 80 GB")
    assert err.reason == "out_of_memory" and err.exit_code == 1


def test_table_reads_typed_keys_and_rejects_unknown():
    t = Table({"name": "x", "memory_GiB": 80, "bandwdith": "1GB/s"}, "gpu.toml")
    assert t.str("name") == "x"
    assert t.quantity("memory", lambda v, field: 0.0, {"memory_GiB": 2**30}) == 80 * 2**30
    t.float("bandwidth", default=None)
    with pytest.raises(ConfigError, match="unknown key 'bandwdith'.*did you mean bandwidth"):
        t.done()


def test_table_errors_name_file_key_and_value():
    t = Table({"latency_us": "fast"}, "links.toml")
    with pytest.raises(ConfigError, match=r"links.toml: latency_us = 'fast' is not valid: expected a number"):
        t.float("latency_us")
    with pytest.raises(ConfigError, match="missing required key 'name'"):
        t.str("name")


def test_table_quantity_parses_strings_with_units():
    t = Table({"bandwidth": "200Gbps"}, "nic.toml")
    assert t.quantity("bandwidth", parse_bandwidth, {"bandwidth_GBps": 1e9}) == 25e9
    t.done()
    both = Table({"bandwidth": "200Gbps", "bandwidth_GBps": 25}, "nic.toml")
    with pytest.raises(ConfigError, match="only one of"):
        both.quantity("bandwidth", parse_bandwidth, {"bandwidth_GBps": 1e9})


def test_load_toml_reports_file_on_syntax_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = \n")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_toml(bad)
    with pytest.raises(ConfigError, match="no such file"):
        load_toml(tmp_path / "missing.toml")
