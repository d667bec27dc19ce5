"""Figures from plain data (arrays and records): one module per family, all drawn with the
colours of :mod:`willitscale.report.style`.

matplotlib is imported only when a figure is drawn (the ``plot`` extra); without it every
function raises :class:`~willitscale.errors.MissingDependency` with the install command. Figures
are ``matplotlib.figure.Figure`` objects built without pyplot (no global state, no GUI backend);
:func:`~willitscale.report.plots.base.write_charts` saves them as PNG and SVG with fixed
metadata, so the same data gives byte-identical files.

Modules: :mod:`.base` (loading, the :class:`~.base.Chart` record, saving), :mod:`.timeline`
(the step timeline), :mod:`.scaling` (breakdown across node counts, scaling efficiency, comms vs
compute with the crossover), :mod:`.memory`, :mod:`.requirements` (bandwidth curves),
:mod:`.planner` (top plans), :mod:`.measurements` (busbw vs message size, predicted vs
measured), :mod:`.fabric` (link utilisation histogram, GPU-pair traffic heatmap).
"""
