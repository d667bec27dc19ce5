#!/bin/bash
# A Megatron-LM launch script for Llama 3 8B with data parallelism only and the distributed
# optimizer. The shape is Llama 3 8B's (meta-llama/Meta-Llama-3-8B config.json: 32 layers,
# hidden 4096, FFN 14336, 32 heads, 8 KV heads, 8192 positions); the flags are Megatron-LM's
# (megatron/training/arguments.py); the plan and the batch are an example written for
# willitscale's docs (docs/formats.md, "Which framework's memory"), not a published run.
torchrun --nproc-per-node 8 pretrain_gpt.py \
    --num-layers 32 --hidden-size 4096 --num-attention-heads 32 \
    --group-query-attention --num-query-groups 8 --ffn-hidden-size 14336 \
    --max-position-embeddings 8192 --seq-length 4096 \
    --micro-batch-size 1 --global-batch-size 64 \
    --tensor-model-parallel-size 1 --pipeline-model-parallel-size 1 \
    --use-distributed-optimizer --recompute-granularity full --bf16
