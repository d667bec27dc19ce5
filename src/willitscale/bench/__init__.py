"""Measuring a real (or emulated) cluster: benchmarks and launchers. The runs they measure are
kept in the results store (:mod:`willitscale.results`).

* :mod:`~willitscale.bench.collectives`, :mod:`~willitscale.bench.matmul`,
  :mod:`~willitscale.bench.train` -- the benchmarks (torch, imported only inside a worker);
* :mod:`~willitscale.bench.ranks.launch` -- the built-in ``--nproc`` spawner; torchrun runs
  ``python -m willitscale bench`` directly; :mod:`~willitscale.bench.ranks.watch`,
  :mod:`~willitscale.bench.ranks.heartbeat`, :mod:`~willitscale.bench.ranks.lifeline` -- ranks that fail
  or hang are named and stopped, and none outlives its launcher;
  :mod:`~willitscale.bench.ranks.rendezvous` -- the rendezvous store, on loopback for one node;
* :mod:`~willitscale.bench.emulate` -- a small cluster of network namespaces on one machine;
* :mod:`~willitscale.bench.sweep` -- sweep arithmetic, usable without torch.
"""
