"""Validated inputs: the parallel plan, many plans as arrays, execution options, the scenario
(model, cluster, plan, assumptions), settings from flags and TOML, and what a model can be split
by.

Modules: :mod:`.plan`, :mod:`.batch`, :mod:`.options`, :mod:`.scenario`, :mod:`.settings`,
:mod:`.build` (settings into a :class:`~.scenario.Scenario`), :mod:`.validate`.
"""
