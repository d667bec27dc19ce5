"""Sweeps: a grid of scenarios (fabric simulations or step-time estimates) run on every core or
on a Ray cluster, written row by row to CSV or Parquet, resumable (``willitscale sweep``).

* :mod:`~willitscale.sweep.grid`: the grid file and its points;
* :mod:`~willitscale.sweep.points`: what one point computes, per kind of grid;
* :mod:`~willitscale.sweep.output`: the row files, and which points they already hold;
* :mod:`~willitscale.sweep.runner`: running the points in-process, on a pool or on Ray.
"""
