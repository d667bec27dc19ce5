"""Measuring a real (or emulated) cluster: benchmarks, launchers, the results store.

* :mod:`~willitscale.bench.collectives`, :mod:`~willitscale.bench.matmul`,
  :mod:`~willitscale.bench.train` -- the benchmarks (torch, imported only inside a worker);
* :mod:`~willitscale.bench.launch` -- the built-in ``--nproc`` spawner; torchrun runs
  ``python -m willitscale bench`` directly;
* :mod:`~willitscale.results.store` -- the SQLite results store;
* :mod:`~willitscale.bench.emulate` -- a small cluster of network namespaces on one machine;
* :mod:`~willitscale.results.records`, :mod:`~willitscale.bench.sweep` -- pure data and sweep
  arithmetic, usable without torch.
"""
