#!/usr/bin/env bash
# One node, every GPU (or NPROC ranks): an all_reduce/all_gather sweep with torchrun.
#
#   bash examples/torchrun/single_node.sh                 # one rank per GPU
#   NPROC=2 bash examples/torchrun/single_node.sh -e 8MB  # 2 CPU ranks (Gloo), smaller sweep
#
# Extra arguments are passed to `willitscale bench collectives` (later flags win).
# --standalone lets torchrun pick a free port on this host. Rank 0 prints the table and
# stores the run: see it with `willitscale results list`.
set -euo pipefail
exec torchrun --standalone --nnodes=1 --nproc-per-node="${NPROC:-gpu}" \
  -m willitscale bench collectives --ops all_reduce,all_gather -b 1MB -e 1GB -f 2 "$@"
