#!/usr/bin/env bash
# Several nodes with torchrun: run this script on every node, with the same MASTER_ADDR
# (node 0's address, reachable from all nodes), MASTER_PORT (any free port on node 0) and
# NNODES, and each node's own NODE_RANK (0 .. NNODES-1).
#
#   node 0:  NNODES=2 NODE_RANK=0 MASTER_ADDR=10.0.0.1 MASTER_PORT=29411 bash multi_node.sh
#   node 1:  NNODES=2 NODE_RANK=1 MASTER_ADDR=10.0.0.1 MASTER_PORT=29411 bash multi_node.sh
#
# Global rank 0 (on node 0) stores the runs in node 0's results store; set WILLITSCALE_HOME to
# a shared folder to keep every node's runs in one place. NCCL picks the network itself; pin
# it with NCCL_SOCKET_IFNAME / NCCL_IB_HCA if it picks the wrong interface (the run records
# every NCCL_* variable it saw).
set -euo pipefail
: "${NNODES:?set NNODES}" "${NODE_RANK:?set NODE_RANK}" "${MASTER_ADDR:?set MASTER_ADDR}" "${MASTER_PORT:?set MASTER_PORT}"
launch=(torchrun --nnodes="$NNODES" --node-rank="$NODE_RANK" --nproc-per-node="${NPROC:-gpu}"
        --master-addr="$MASTER_ADDR" --master-port="$MASTER_PORT" -m willitscale bench)

"${launch[@]}" collectives --ops all_reduce,all_gather,reduce_scatter -b 1MB -e 4GB -f 2 \
  --label "torchrun ${NNODES} nodes"
"${launch[@]}" train --model gpt2 --seq-len 1024 --batch 8 --dtype bfloat16 \
  --label "torchrun ${NNODES} nodes"
