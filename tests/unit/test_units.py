import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from willitscale.errors import ConfigError
from willitscale.units import (
    format_bandwidth,
    format_count,
    format_size,
    format_time,
    parse_bandwidth,
    parse_count,
    parse_flop_rate,
    parse_ports,
    parse_size,
    parse_time,
)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("200Gbps", 25e9),  # 200e9 bits/s / 8 bits per byte
        ("200 Gb/s", 25e9),
        ("25 GB/s", 25e9),
        ("25GBps", 25e9),
        ("600GB/s", 600e9),  # an unlabelled figure is one direction
        ("600GB/s duplex", 300e9),  # labelled duplex: halved
        ("900 GB/s (bidirectional)", 450e9),
        ("200Mbit", 25e6),  # tc spelling, bits
        ("3.2Tbps", 400e9),
        ("1 GiB/s", 2**30),
        ("200gbps", 25e9),  # lower-case prefix: still giga, and b is still a bit
        ("100mbit", 12.5e6),  # "m" is mega here: no bandwidth is quoted in millibits
        ("0", 0.0),
    ],
)
def test_parse_bandwidth(text, expected):
    assert parse_bandwidth(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "text, expected",
    [
        ("80GiB", 80 * 2**30),  # GiB = 2^30
        ("80GB", 80e9),  # GB = 10^9
        ("1.4GB", 1.4e9),
        ("97.5 MB", 97.5e6),
        ("2560Gb", 320e9),  # bits: 2560e9 / 8 -- the handbook's 80B-param fp32 example
        ("1024", 1024.0),
        (4096, 4096.0),
        ("1e9", 1e9),
    ],
)
def test_parse_size(text, expected):
    assert parse_size(text) == pytest.approx(expected, rel=1e-12)


@pytest.mark.parametrize(
    "text, expected",
    [("2us", 2e-6), ("2 µs", 2e-6), ("1.5ms", 1.5e-3), ("0.42s", 0.42), ("0", 0.0),
     ("1week", 604800.0), ("3 days", 259200.0), ("500ns", 5e-7)],
)
def test_parse_time(text, expected):
    assert parse_time(text) == pytest.approx(expected, rel=1e-12)


def test_flop_rate_and_count():
    assert parse_flop_rate("312TFLOPS") == pytest.approx(312e12)
    assert parse_flop_rate("989 TFLOP/s") == pytest.approx(989e12)
    assert parse_count("175B") == pytest.approx(175e9)  # B = billion for counts
    assert parse_count("2e9") == 2e9
    assert parse_count("7M") == 7e6


def test_parse_ports():
    assert parse_ports("8x400Gbps") == (8, pytest.approx(50e9))
    assert parse_ports("200Gbps") == (1, pytest.approx(25e9))
    assert parse_ports("4 x 25GB/s") == (4, pytest.approx(25e9))


@pytest.mark.parametrize(
    "fn, text, fragment",
    [
        (parse_bandwidth, "200", "ambiguous"),  # bare non-zero bandwidth: which unit?
        (parse_bandwidth, "200Gbpz", "bandwidth"),
        (parse_bandwidth, "-5GB/s", ">= 0"),
        (parse_time, "2", "ambiguous"),
        (parse_time, "2 parsecs", "time"),
        (parse_size, "lots", "size"),
        (parse_size, "nan", "size"),
        (parse_size, True, "size"),
        (parse_count, "inf", "count"),
    ],
)
def test_bad_input_is_a_config_error_naming_value(fn, text, fragment):
    with pytest.raises(ConfigError) as info:
        fn(text, field="--x")
    message = str(info.value)
    assert "--x" in message and repr(text) in message and fragment in message


def test_formatting():
    assert format_size(1.4e9) == "1.40 GB"
    assert format_size(80 * 2**30, binary=True) == "80.0 GiB"
    assert format_bandwidth(25e9) == "25.0 GB/s"
    assert format_bandwidth(25e9, bits=True) == "200 Gb/s"
    assert format_time(0.0175) == "17.5 ms"
    assert format_time(2e-6) == "2.00 us"
    assert format_time(7200) == "2.00 h"
    assert format_time(4.04e-15) == "4.04e-15 s"  # below a nanosecond: scientific, not 0.00000404 ns
    assert format_count(774030080) == "774 M"


@given(st.floats(min_value=1e-3, max_value=1e15, allow_nan=False))
def test_size_format_round_trips_to_three_figures(x):
    back = parse_size(format_size(x))
    assert math.isclose(back, x, rel_tol=5e-3)


@given(st.floats(min_value=1e3, max_value=1e14, allow_nan=False))
def test_bandwidth_format_round_trips(x):
    assert math.isclose(parse_bandwidth(format_bandwidth(x)), x, rel_tol=5e-3)
    assert math.isclose(parse_bandwidth(format_bandwidth(x, bits=True)), x, rel_tol=5e-3)
