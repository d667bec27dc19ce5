"""What a measurement was taken on, in one flat record stored with every benchmark run (pure).

Issue 18 asks every result to carry its provenance: the GPU, the driver, CUDA, torch, the
clocks the GPU ran at, the date and the host. The benchmark's environment record
(:mod:`willitscale.bench.environment`) already holds most of these, spread over nodes and
ranks; :func:`provenance_of` gathers them into one record with the same field names as a
measured profile's ``[provenance]`` table (:class:`willitscale.hardware.profile.Provenance`).
A fact that could not be read is left out of the record and named in ``absent`` with the
reason (no ``nvidia-smi`` on the machine, a CPU run), never guessed.

Clocks come from ``nvidia-smi --query-gpu=clocks.sm,clocks.mem,...`` (the clock at the moment
of the query, and the maximum the board allows): the SM clock of a GPU under load can sit below
its maximum (power or thermal limits), which is why it is recorded next to what was measured.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["provenance_of", "parse_clocks", "CLOCK_QUERY", "PROVENANCE_FIELDS"]

#: the ``nvidia-smi --query-gpu`` fields read for the clocks, in this order (MHz, nounits)
CLOCK_QUERY = ("index", "clocks.sm", "clocks.mem", "clocks.max.sm", "clocks.max.mem")
#: the record's fields, as the measured profile's [provenance] names them
PROVENANCE_FIELDS = ("device", "driver", "cuda", "torch", "sm_clock_MHz", "memory_clock_MHz",
                     "max_sm_clock_MHz", "max_memory_clock_MHz", "date", "host")


def _mhz(text: str) -> float | None:
    try:
        value = float(text)
    except ValueError:  # "[N/A]", "[Not Supported]"
        return None
    return value if value > 0 else None


def parse_clocks(text: str) -> list[dict[str, Any]]:
    """Each GPU's clocks from ``nvidia-smi --query-gpu=<CLOCK_QUERY> --format=csv,noheader,nounits``:
    ``[{"index", "sm_clock_MHz", "memory_clock_MHz", "max_sm_clock_MHz", "max_memory_clock_MHz"}]``
    (a value nvidia-smi reports as N/A is None)."""
    out = []
    for line in text.strip().splitlines():
        parts = [p.strip() for p in line.split(",")]
        if len(parts) != len(CLOCK_QUERY) or not parts[0].isdigit():
            continue
        sm, mem, max_sm, max_mem = (_mhz(p) for p in parts[1:])
        out.append({"index": int(parts[0]), "sm_clock_MHz": sm, "memory_clock_MHz": mem,
                    "max_sm_clock_MHz": max_sm, "max_memory_clock_MHz": max_mem})
    return out


def _first_host(environment: Mapping[str, Any]) -> Mapping[str, Any]:
    hosts = environment.get("hosts") or [{}]
    return hosts[0] or {}


def _clock_facts(host: Mapping[str, Any], is_gpu: bool) -> tuple[dict[str, float], dict[str, str]]:
    clocks = host.get("gpu_clocks")
    names = ("sm_clock_MHz", "memory_clock_MHz", "max_sm_clock_MHz", "max_memory_clock_MHz")
    if not is_gpu:
        return {}, {n: "a CPU run: no GPU clocks" for n in names}
    if not clocks:
        return {}, {n: "nvidia-smi was not found or did not answer" for n in names}
    first = clocks[0]  # the GPU of local rank 0 (the one a one-GPU run used)
    found = {n: float(first[n]) for n in names if first.get(n) is not None}
    return found, {n: "nvidia-smi reports N/A" for n in names if n not in found}


def provenance_of(environment: Mapping[str, Any], *, date: str) -> dict[str, Any]:
    """The provenance record of a run from its environment record and its start ``date``
    (ISO 8601): ``{field: value, ..., "absent": {field: why}}``."""
    host = _first_host(environment)
    devices = list(environment.get("devices") or [])
    is_gpu = any(d != "cpu" for d in devices)
    record: dict[str, Any] = {"date": date}
    absent: dict[str, str] = {}
    values = {"device": ", ".join(devices) if devices else None,
              "driver": environment.get("driver"), "cuda": environment.get("cuda"),
              "torch": environment.get("torch"), "host": host.get("hostname") or host.get("node")}
    why = {"device": "no device was recorded",
           "driver": "a CPU run" if not is_gpu else "nvidia-smi was not found or did not answer",
           "cuda": "torch was built without CUDA", "torch": "not recorded",
           "host": "not recorded"}
    for name, value in values.items():
        if value:
            record[name] = str(value)
        else:
            absent[name] = why[name]
    clocks, missing = _clock_facts(host, is_gpu)
    record.update(clocks)
    absent.update(missing)
    record["absent"] = absent
    return record
