"""Starting, connecting and watching a benchmark's ranks (the machinery, not the measurements).

* :mod:`.launch` -- the built-in ``--nproc`` spawner and its report of how the ranks ended;
* :mod:`.worker` -- one rank: the environment, the benchmark, the store (rank 0);
* :mod:`.dist` -- ``torch.distributed`` set-up (NCCL/Gloo) and the collectives' timeout;
* :mod:`.rendezvous` -- the rendezvous store, bound to loopback when the job stays on one node;
* :mod:`.watch`, :mod:`.heartbeat`, :mod:`.lifeline` -- a rank that dies or hangs is named and
  the rest stopped; no rank outlives its launcher;
* :mod:`.progress` -- the progress line while rows are measured.
"""
