"""Print docs/scenario.md: ``python scripts/scenario_reference.py > docs/scenario.md``."""

from willitscale.scenario.reference import reference_markdown

print(reference_markdown(), end="")
