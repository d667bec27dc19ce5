"""The step engine: one training step of many plans at once, as arrays.

:mod:`.engine` (what a scenario's plans share, the result arrays) and :mod:`.evaluate` (the
step, part by part), assembled by :mod:`.assemble`. One module per parallelism:
:mod:`.data` (gradient buckets per pipeline stage, with :mod:`.buckets`, :mod:`.gradients` and
:mod:`.tail`), :mod:`.tensor`, :mod:`.pipeline`, :mod:`.context`, :mod:`.expert`,
:mod:`.sharding` (ZeRO/FSDP); :mod:`.traffic` is the type they share.
"""
