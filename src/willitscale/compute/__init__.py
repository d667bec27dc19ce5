"""Compute time on a GPU: the per-op model (:mod:`.model` over :mod:`.layer`: GEMMs by shape
(:mod:`.gemm`), attention as the kernel that runs it (:mod:`.attention`), memory-bound
operations as bytes over HBM bandwidth (:mod:`.ops`), FP8 as it is run), the per-GPU curves it
runs on (:mod:`.curves`, ``curves.toml``), the kernel options (:mod:`.options`), the flat
efficiency conventions (HFU, MFU) and their defaults (:mod:`.efficiency`), and the optimizer's
traffic (:mod:`.kernels`)."""
