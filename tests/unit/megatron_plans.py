"""The parallel plans the Megatron-LM / NeMo round-trip tests write out and read back
(tests/unit/test_megatron_args.py: command-line flags; tests/unit/test_framework_yaml.py:
``--yaml-cfg`` and NeMo YAML files). Each is a plan of 64 GPUs (:data:`CLUSTER`) touching one
more of the settings those files can say: data-only, TP + sequence parallel + ZeRO-1, TP x PP
with full recomputation, the interleaved schedule, block recomputation, context parallel.

Imported by module name (``from megatron_plans import ...``): pytest puts this folder on
``sys.path`` for the test files in it (its default ``prepend`` import mode, no ``__init__.py``).
"""

from __future__ import annotations

from willitscale.scenario.plan import Plan

__all__ = ["CLUSTER", "PLANS"]

CLUSTER = {"gpu": "h100", "nodes": 8, "gpus_per_node": 8}  # 64 GPUs

PLANS = [
    Plan(dp=64, micro_batch=2, grad_accum=1),
    Plan(dp=8, tp=8, sequence_parallel=True, zero=1, micro_batch=1, grad_accum=4, recompute="selective"),
    Plan(dp=2, tp=4, pp=8, sequence_parallel=True, zero=1, micro_batch=1, grad_accum=16,
         recompute="full"),
    Plan(dp=4, tp=2, pp=8, micro_batch=1, grad_accum=16, pp_schedule="interleaved", virtual_stages=5),
    # --recompute-granularity full --recompute-method block --recompute-num-layers 3
    Plan(dp=8, tp=2, pp=4, micro_batch=2, grad_accum=8, recompute="layers:3"),
    Plan(dp=16, cp=4, micro_batch=1, grad_accum=2, zero=1),
]
