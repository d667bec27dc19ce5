"""One plan's estimate: the engine's numbers dressed as a :class:`~.result.StepEstimate` with
its breakdown, memory verdict, communication reports, timeline, bottleneck, computed fixes
(:mod:`willitscale.estimation.verdict.levers`) and assumptions.

Named ``estimation`` rather than ``estimate``: the public function ``willitscale.estimate``
would otherwise be shadowed by the package of the same name once it is imported.
"""
