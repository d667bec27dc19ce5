"""Which rows may choose constants (**fit**) and which only check them (**test**).

The rule was committed before any constant of the compute model was chosen (docs/validation.md
tells the whole of it):

1. whole **split groups** go to one side: rows of one measurement campaign (one team, code
   base and cluster, published in several places) share a group (``organisation/code-or-report``);
2. the wave-1 goldens keep their roles: Narayanan et al. 2021 fit; Korthikanti et al. 2022,
   BLOOM, MT-NLG and Llama 3 test;
3. the groups of the first research table were put in strata (Hopper FP8, Hopper BF16, Ampere)
   and alternated test, fit, test, ... in ``sha256(group)`` order within each stratum: the
   result is frozen in :data:`FROZEN`;
4. a group added after that goes to **test** when ``int(sha256(group)[:8], 16)`` is even, else
   to **fit** (:func:`side_by_rule`), so adding rows never moves a group already assigned.
"""

from __future__ import annotations

import hashlib

__all__ = ["FROZEN", "SIDES", "side_by_rule"]

SIDES = ("fit", "test")

#: the assignment frozen when the rule was committed (rules 2 and 3)
FROZEN = {
    "nvidia/megatron-sc21": "fit", "nvidia/megatron-2022": "test", "bigscience/bloom": "test",
    "microsoft-nvidia/mt-nlg": "test", "meta/llama3": "test",
    "ibm/fms-fsdp": "test", "nvidia/nemotron-4-340b": "fit",
    "lambdalabs/flash-attention-2": "test", "tzafon/smollm3-torchtitan": "test",
    "ibm-meta/float8-fsdp2": "fit", "allenai/olmo-core": "test", "bytedance/megascale": "test",
    "meta/opt-175b": "fit", "dao-ailab/flash-attention": "test",
}


def side_by_rule(group: str) -> str:
    """``fit`` or ``test`` for a split group: the frozen side, else the hash-parity rule."""
    if group in FROZEN:
        return FROZEN[group]
    digest = hashlib.sha256(group.encode()).hexdigest()
    return "test" if int(digest[:8], 16) % 2 == 0 else "fit"
