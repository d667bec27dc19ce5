"""Benchmark options: validated at the edge, JSON round trips, nccl-tests flag spellings."""

from __future__ import annotations

import argparse

import pytest

from willitscale.bench.options import (
    CollectiveOptions,
    MatmulOptions,
    TrainOptions,
    add_collective_args,
    add_matmul_args,
    add_train_args,
    options_from_args,
)
from willitscale.errors import ConfigError, UnknownNameError


def _parse(adder, argv):
    p = argparse.ArgumentParser()
    adder(p)
    return p.parse_args(argv)


def test_nccl_tests_flags_and_our_units():
    args = _parse(add_collective_args, ["-b", "1MB", "-e", "1MiB", "-f", "2", "--ops", "allreduce,ag",
                                        "-d", "bf16", "-n", "7", "-w", "0"])
    opts = options_from_args("collectives", args)
    # MB = 1e6, MiB = 2^20
    assert (opts.min_bytes, opts.max_bytes) == (1_000_000, 1_048_576)
    assert opts.ops == ("all_reduce", "all_gather") and opts.dtype == "bfloat16"
    assert (opts.iters, opts.warmup) == (7, 0)
    assert CollectiveOptions.from_json(opts.to_json()) == opts


def test_step_bytes_replaces_the_factor():
    opts = options_from_args("collectives", _parse(add_collective_args, ["-b", "1kB", "-e", "4kB",
                                                                         "-i", "1kB"]))
    assert opts.factor is None and opts.step_bytes == 1000


def test_all_ops():
    opts = options_from_args("collectives", _parse(add_collective_args, ["--ops", "all"]))
    assert len(opts.ops) == 7


@pytest.mark.parametrize("argv", [["--ops", "allreduse"], ["-d", "float8"], ["-b", "2MB", "-e", "1MB"],
                                  ["-n", "0"], ["-b", "1.5"]])
def test_bad_collective_flags(argv):
    with pytest.raises(ConfigError):
        options_from_args("collectives", _parse(add_collective_args, argv))


def test_matmul_shapes():
    opts = options_from_args("matmul", _parse(add_matmul_args, ["--sizes", "64,32x16x8"]))
    assert opts.shapes == ((64, 64, 64), (32, 16, 8))
    assert MatmulOptions.from_json(opts.to_json()) == opts


def test_train_options():
    opts = options_from_args("train", _parse(add_train_args, ["--bucket-size", "1MiB", "--seq-len", "64"]))
    assert opts.bucket_bytes == 2**20
    assert TrainOptions.from_json(opts.to_json()) == opts
    with pytest.raises(UnknownNameError):
        TrainOptions(model="gpt3")
    with pytest.raises(ConfigError):
        TrainOptions(seq_len=4096)  # gpt2-tiny has 512 positions
