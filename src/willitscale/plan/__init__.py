"""The parallel plan and what a step costs on a cluster: the estimate, the planner, scaling,
requirements, sizing.

Inputs: :mod:`.plan` (degrees and batch arithmetic), :mod:`.scenario`, :mod:`.options`,
:mod:`.settings` / :mod:`.build` (flags and TOML), :mod:`.validate` (what a model can be split
by; the out-of-memory verdict).

The model, vectorised over plans (:mod:`.batch`): :mod:`.engine` and :mod:`.evaluation` (the
step), :mod:`.stages` (pipeline stages' layers, parameters, FLOPs), :mod:`.kernels` (the default
compute model), :mod:`.placement` and :mod:`.links` (ranks on nodes, collectives over the links
each group crosses), :mod:`.tensor`, :mod:`.context`, :mod:`.experts`, :mod:`.pipeline` (each
parallelism's traffic; bubble; micro-batches in flight), :mod:`.sharding` (ZeRO/FSDP),
:mod:`.gradsync`, :mod:`.buckets`, :mod:`.gradients` and :mod:`.tail` (data-parallel gradient
buckets), :mod:`.memory`, :mod:`.assemble`.

One plan's estimate: :mod:`.estimate` (a :class:`~.result.StepEstimate`), with its reports
(:mod:`.dpreport`, :mod:`.mpreport`, :mod:`.mptimeline`, :mod:`.mpbottleneck`,
:mod:`.mpassumptions`, :mod:`.bottleneck`, :mod:`.steptimeline`, :mod:`.comms`).

Searching: :mod:`.search` (the planner) and :mod:`.explain`. Checks against the world:
:mod:`.published` (published 3D-parallel runs), :mod:`.linkrace` (the A100 vs A800 case),
:mod:`.reproduce` (seeds/003). Also :mod:`.scaling`, :mod:`.requirements`, :mod:`.sizing`.
"""
