"""Measurements made elsewhere, read into the results store: nccl-tests logs, text and JSON
(:mod:`.nccl_tests`, :mod:`.nccl_tests_json`, stored by :mod:`.nccl_import`), and PyTorch
profiler (Kineto) traces (:mod:`.kineto`)."""
