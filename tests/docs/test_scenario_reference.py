"""docs/scenario.md documents every key the scenario loader accepts, and only those (issue 17)."""

from pathlib import Path

import pytest

from willitscale.scenario.reference import (
    SETTING_DOCS,
    reference_markdown,
    setting_type,
)
from willitscale.scenario.settings import _TOML_KEY, SETTINGS, load_settings

DOCS = Path(__file__).resolve().parents[2] / "docs" / "scenario.md"

#: a valid TOML value per documented type (what the page tells a user to write)
SAMPLE = {"string": '"x"', "integer": "2", "number": "0.5", "fraction in (0, 1]": "0.5",
          "true or false": "true", 'link name or rate ("200Gbps")': '"200Gbps"',
          "count (2e9, 7B)": '"7B"', 'size with a unit ("25MiB")': '"25MiB"',
          'size with a unit ("512MB")': '"512MB"', 'time ("1.5s", "200ms")': '"200ms"',
          'size ("4MB", bytes)': '"4MB"', 'bandwidth ("2GB/s", "10Gbps")': '"10Gbps"'}


def test_every_setting_is_documented_and_nothing_else():
    assert set(SETTING_DOCS) == set(SETTINGS)


def test_the_page_is_the_generated_one():
    assert DOCS.read_text() == reference_markdown(), (
        "docs/scenario.md is stale: python scripts/scenario_reference.py > docs/scenario.md")


@pytest.mark.parametrize("name", sorted(SETTINGS))
def test_each_documented_key_loads_where_the_page_puts_it(tmp_path, name):
    table, _ = SETTINGS[name]
    key = _TOML_KEY.get((table, name), name)
    kind = setting_type(name)
    assert kind in SAMPLE, f"{name}: type {kind!r} has no sample; the page's type is unknown"
    text = (f"[{table}]\n" if table else "") + f"{key} = {SAMPLE[kind]}\n"
    path = tmp_path / "s.toml"
    path.write_text(text)
    assert name in load_settings(path)
