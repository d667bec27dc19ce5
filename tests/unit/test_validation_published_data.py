"""The published-run data: every row cited, on the side the committed rule gives it, and
either expressible as settings that build a scenario or saying why not."""

import hashlib

import pytest

from willitscale.errors import ConfigError
from willitscale.scenario.build import build_scenario
from willitscale.validation.published import PUBLISHED_RUNS, WAVE1_RUNS, side_by_rule
from willitscale.validation.published.rows import PublishedRun
from willitscale.workload.transformer import Transformer


def test_rows_are_cited_and_unique():
    assert len({r.id for r in PUBLISHED_RUNS}) == len(PUBLISHED_RUNS)
    for r in PUBLISHED_RUNS:
        assert len(r.source) > 20, r.id
        assert r.published > 0


def test_wave1_rows_keep_their_roles():
    # Narayanan et al. 2021 was fitted on in wave 1; the other wave-1 sources were test rows.
    assert len(WAVE1_RUNS) == 23
    for r in WAVE1_RUNS:
        assert r.side == ("fit" if r.split_group == "nvidia/megatron-sc21" else "test"), r.id


def test_the_hash_rule_for_groups_added_later():
    # Rule 4: a new group is test when the first 8 hex digits of its sha256 are even.
    group = "example/added-later"
    parity = int(hashlib.sha256(group.encode()).hexdigest()[:8], 16) % 2
    assert side_by_rule(group) == ("test" if parity == 0 else "fit")


def test_a_row_on_the_wrong_side_is_refused():
    row = PUBLISHED_RUNS[0]
    wrong = "test" if row.side == "fit" else "fit"
    with pytest.raises(ConfigError, match="split rule"):
        PublishedRun(id="x", name="x", side=wrong, split_group=row.split_group, source="s",
                     quality="good", metric="mfu", published=0.5, shape={"catalog": "gpt2"},
                     settings={})


def test_unexpressible_rows_say_why_and_expressible_ones_build():
    for r in PUBLISHED_RUNS:
        if not r.expressible:
            assert len(r.not_expressible) > 20, r.id
            continue
        shape = dict(r.shape)
        model = shape.pop("catalog") if "catalog" in shape else Transformer(**shape)
        scenario = build_scenario({**r.settings, "model": model})
        assert scenario.cluster.gpus == scenario.plan.gpus, r.id
