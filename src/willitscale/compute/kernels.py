"""Optimizer traffic: the HBM bytes one optimizer step moves per parameter.

The optimizer step is memory-bound: its time is these bytes per parameter over the GPU's
memory bandwidth (:func:`willitscale.step.assemble.optimizer_time_per_param`), unless a
calibration measured it.
"""

from __future__ import annotations

__all__ = ["OPTIMIZER_BYTES", "OPTIMIZER_BYTES_PER_PARAM"]

OPTIMIZER_BYTES_PER_PARAM = 28  #: fused AdamW with fp32 state (see OPTIMIZER_BYTES)
#: HBM bytes per parameter of each optimizer implementation (fp32 weights, gradients, moments):
#: fused AdamW reads weight, gradient, two moments (16 B) and writes weight and moments (12 B);
#: PyTorch's default torch.optim.AdamW on CUDA (no ``fused=True``: the foreach implementation,
#: torch/optim/adam.py ``_multi_tensor_adam``) makes one pass per operation: weight decay
#: (r/w p, 8 B), lerp of m (r m, g, w m, 12), v *= beta2 (8), addcmul into v (r v, g, w v, 12),
#: sqrt(v) into a temporary (8), divide (8), add eps (8), addcdiv into p (r p, m, t, w p, 16):
#: 80 B.
OPTIMIZER_BYTES = {"adamw-fused": OPTIMIZER_BYTES_PER_PARAM, "adamw-foreach": 80}
