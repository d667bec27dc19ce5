"""The provenance record stored with every benchmark run (bench.provenance, pure)."""

from __future__ import annotations

from willitscale.bench.provenance import parse_clocks, provenance_of

# `nvidia-smi --query-gpu=index,clocks.sm,clocks.mem,clocks.max.sm,clocks.max.mem
#  --format=csv,noheader,nounits` prints one line per GPU in this form (the values are made up)
SMI = "0, 1755, 2619, 1980, 2619\n1, [N/A], 2619, 1980, 2619\n"


def test_clocks_parsed_and_na_is_none():
    first, second = parse_clocks(SMI)
    assert first == {"index": 0, "sm_clock_MHz": 1755.0, "memory_clock_MHz": 2619.0,
                     "max_sm_clock_MHz": 1980.0, "max_memory_clock_MHz": 2619.0}
    assert second["sm_clock_MHz"] is None


def _gpu_env(clocks):
    return {"devices": ["NVIDIA H100 80GB HBM3"], "driver": "570.1", "cuda": "13.0",
            "torch": "2.11.0", "hosts": [{"hostname": "node-1", "gpu_clocks": clocks}]}


def test_gpu_run_has_every_field():
    rec = provenance_of(_gpu_env(parse_clocks(SMI)), date="2026-11-24T21:00:00+00:00")
    assert rec["device"] == "NVIDIA H100 80GB HBM3" and rec["driver"] == "570.1"
    assert rec["cuda"] == "13.0" and rec["torch"] == "2.11.0" and rec["host"] == "node-1"
    assert rec["sm_clock_MHz"] == 1755.0 and rec["memory_clock_MHz"] == 2619.0
    assert rec["absent"] == {}


def test_missing_facts_are_absent_with_a_reason_never_guessed():
    rec = provenance_of({**_gpu_env([]), "driver": None}, date="2026-11-24")
    assert "sm_clock_MHz" not in rec and "driver" not in rec
    assert rec["absent"]["sm_clock_MHz"] == "nvidia-smi was not found or did not answer"
    assert rec["absent"]["driver"] == "nvidia-smi was not found or did not answer"
    na = provenance_of(_gpu_env([parse_clocks(SMI)[1]]), date="d")
    assert "sm_clock_MHz" not in na and na["absent"]["sm_clock_MHz"] == "nvidia-smi reports N/A"
