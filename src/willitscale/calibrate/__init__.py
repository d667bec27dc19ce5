"""Fitting the model to measurements: link alpha-beta figures from collective sweeps, compute
efficiency from matmul and training runs, into a :class:`~willitscale.hardware.calibration.
Calibration`; and comparing predictions with what was measured (``validate``).

Reads stored runs (torch-free records); the model core never imports this package.
"""
