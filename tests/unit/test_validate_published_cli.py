"""``willitscale validate --published``: per-row predicted vs published and the error summary.

Checked on a few rows (monkeypatched set) against numbers derived here independently: each
row's error is ``ours / published - 1`` (``published / ours - 1`` for a step time), the mean
absolute error, median, worst and bias are those of the rows' errors."""

import json
import statistics

import pytest

import willitscale.validation.published as published
from willitscale.validation.published import PUBLISHED_RUNS, predict, value

IDS = ("w1-gpt-22b-full-recompute", "olmo-core-1b-bf16", "ibm-fsdp-7b-h100")


@pytest.fixture
def few_rows(monkeypatch):
    rows = [r for r in PUBLISHED_RUNS if r.id in IDS]
    assert len(rows) == len(IDS)
    # one not-expressible test row, listed with its reason
    odd = next(r for r in PUBLISHED_RUNS if r.side == "test" and not r.expressible)
    monkeypatch.setattr(published, "PUBLISHED_RUNS", (*rows, odd))
    return rows, odd


def _error(run):
    ours = value(predict(run), run.metric)
    return run.published / ours - 1 if run.metric == "step_time_s" else ours / run.published - 1


def test_json_rows_and_summary(cli, few_rows):
    rows, odd = few_rows
    code, out, _ = cli("validate", "--published", "--json")
    assert code == 0
    got = json.loads(out)
    errors = {r.id: _error(r) for r in rows}
    assert {r["id"]: r["error"] for r in got["rows"]} == pytest.approx(errors, rel=1e-9)
    e = list(errors.values())
    s = got["summary"]
    assert s["rows"] == 3
    assert s["mean_abs_error"] == pytest.approx(sum(abs(x) for x in e) / 3)
    assert s["median_abs_error"] == pytest.approx(statistics.median(abs(x) for x in e))
    assert abs(s["worst_error"]) == pytest.approx(max(abs(x) for x in e))
    assert s["bias"] == pytest.approx(sum(e) / 3)
    assert got["not_expressible"] == [{"id": odd.id, "reason": odd.not_expressible}]
    assert set(got["groups"]) == {"gpu", "parallelism", "dtype"}


def test_text_table_names_every_row(cli, few_rows):
    code, out, err = cli("validate", "--published")
    assert code == 0
    for row in IDS:
        assert row[:20] in out
    assert "mean |error|" in out and "bias" in out
    assert "not expressible" in err


def test_fit_side_has_only_fit_rows(cli, few_rows):
    code, out, _ = cli("validate", "--published", "--side", "fit", "--json")
    assert code == 0
    assert {r["side"] for r in json.loads(out)["rows"]} <= {"fit"}


def test_published_takes_no_run_ids(cli):
    code, _, err = cli("validate", "--published", "3")
    assert code != 0 and "--published" in err


def test_sources_facts_become_kernel_settings():
    # docs/validation.md, "From the sources' facts to kernel settings"
    from dataclasses import replace

    from willitscale.validation.published import execution_settings

    base = next(r for r in PUBLISHED_RUNS if r.expressible and r.dtype == "bf16")
    plain = replace(base, attention_kernel="", framework="Megatron-LM", compiled=False)
    assert execution_settings(plain) == {}
    for text in ("FlashAttention-2", "PyTorch SDPA", "flash-attn 2.5", "FlashAttention v1"):
        assert execution_settings(replace(plain, attention_kernel=text)) == {"attention_kernel": "fa2"}
    eager = replace(plain, framework="IBM fms-fsdp (FSDP1)")
    assert execution_settings(eager) == {"fusion": "eager"}
    assert execution_settings(replace(eager, compiled=True)) == {}
    fp8 = replace(plain, settings={**plain.settings, "dtype": "fp8"})
    for recipe, want in (("", "delayed"), ("tensorwise dynamic", "tensorwise"),
                         ("dynamic scaling", "tensorwise"), ("rowwise", "rowwise")):
        assert execution_settings(replace(fp8, fp8_recipe=recipe)) == {"fp8_recipe": want}
