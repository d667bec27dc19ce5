"""Compute time on a GPU: the efficiency conventions (HFU, MFU) and their defaults
(:mod:`.efficiency`), and the default per-op model: GEMMs at a fraction of peak, element-wise
work and the optimizer as bytes over HBM bandwidth (:mod:`.kernels`)."""
