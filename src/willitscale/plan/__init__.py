"""The parallel plan and what a step costs on a cluster: the estimate, scaling, requirements, sizing.

Modules: :mod:`.plan` (degrees and batch arithmetic), :mod:`.scenario` and :mod:`.settings` /
:mod:`.build` (inputs from flags and TOML), :mod:`.work` and :mod:`.gradients` (FLOPs and when
gradients are ready), :mod:`.compute` and :mod:`.efficiency` (HFU/MFU), :mod:`.buckets` (DDP's
bucket schedule), :mod:`.comms` (the all-reduce on the links it crosses), :mod:`.estimate`
(assembly into a :class:`~.result.StepEstimate`), :mod:`.bottleneck`, :mod:`.memory`,
:mod:`.steptimeline`, :mod:`.scaling`, :mod:`.requirements`, :mod:`.sizing`, :mod:`.reproduce`.
"""
