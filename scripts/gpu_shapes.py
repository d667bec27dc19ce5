"""Print the GEMM shapes scripts/gpu_capture.sh gives `bench matmul --sizes`, comma-separated
MxNxK: squares 256..16K, every (M, N, K) from {256, 1K, 4K, 16K}, and the projections of catalog
transformers under tensor parallelism 1-8 -- forward (T, N, K), data gradient (T, K, N) and weight
gradient (N, K, T) of q/k/v, attention output, MLP up (gate and up for SwiGLU) and down, at
T = 4096 tokens per micro-batch.

    PYTHONPATH=src python3 scripts/gpu_shapes.py [squares|grid|transformer|all]
"""

from __future__ import annotations

import itertools
import sys

from willitscale.workload.catalog import get_model

SQUARES = [2**p for p in range(8, 15)]  # 256 .. 16384
GRID = (256, 1024, 4096, 16384)
MODELS = ("gpt2-xl", "llama3-8b", "llama3-70b", "gpt3-175b")
TPS = (1, 2, 4, 8)
TOKENS = 4096


def transformer_shapes() -> list[tuple[int, int, int]]:
    out = []
    for name, tp in itertools.product(MODELS, TPS):
        m = get_model(name)
        up = (2 if m.gated_mlp else 1) * m.ffn_hidden
        for n, k in (((m.q_dim + 2 * m.kv_dim) // tp, m.hidden), (m.hidden, m.q_dim // tp),
                     (up // tp, m.hidden), (m.hidden, m.ffn_hidden // tp)):
            out += [(TOKENS, n, k), (TOKENS, k, n), (n, k, TOKENS)]
    return out


def shapes(which: str) -> list[tuple[int, int, int]]:
    chosen = {"squares": [(s, s, s) for s in SQUARES], "grid": list(itertools.product(GRID, repeat=3)),
              "transformer": transformer_shapes()}
    picked = list(chosen.values()) if which == "all" else [chosen[which]]
    return list(dict.fromkeys(s for group in picked for s in group))


if __name__ == "__main__":
    print(",".join(f"{m}x{n}x{k}" for m, n, k in shapes(sys.argv[1] if len(sys.argv) > 1 else "all")))
