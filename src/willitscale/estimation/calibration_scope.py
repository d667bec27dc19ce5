"""Whether a calibration describes the cluster it is applied to, and how its links are scaled.

A calibration (:mod:`willitscale.hardware.calibration`) is fitted on one setup: a backend
(NCCL, Gloo), a device (an A100, a CPU), a number of ranks per node, nodes with some NICs. The
estimate applies it to whatever cluster the scenario names, so it says what it did and warns,
loudly (``warnings`` in the JSON, a warning line in the text), when the two differ:

* **backend**: a GPU cluster trains with NCCL; a fit of Gloo's sockets (the emulated cluster)
  describes another communication stack, its bandwidth and latency included;
* **device**: a fit measured on CPUs, or on another GPU model, applied to this GPU (links and
  compute efficiency alike);
* **shape**: an intra-node fit over a different number of ranks per node, or measured nodes
  with a different number of NICs than this cluster's.

The inter-node figure is scaled to the node per NIC
(:func:`willitscale.hardware.calibration.inter_node_bandwidth`), which an assumption line
shows. The compute efficiency warns when it comes from another device or dtype.
"""

from __future__ import annotations

from willitscale.hardware.calibration import device_matches, inter_node_bandwidth

__all__ = ["calibration_scope"]

_GPU_BACKENDS = ("nccl", "rccl")


def _is_measured(gpu) -> bool:
    """A cluster built from the calibration itself (``calibrate``/``validate``): nothing to
    compare."""
    return getattr(gpu, "vendor", "") == "measured"


def _devices(calibration, link) -> list[str]:
    if link is not None and link.device:
        return [d for d in link.device.split("/") if d]
    return sorted({c.device for c in calibration.compute})


def _device_warning(what: str, devices, gpu) -> str | None:
    other = [d for d in devices if device_matches(d, gpu) is False]
    if not other:
        return None
    return (f"{what} was measured on {', '.join(other)}, not on this cluster's {gpu.display_name}: "
            "it describes other hardware")


def _link_warnings(calibration, link, node) -> list[str]:
    gpu = node.gpu
    level = link.level.replace("_", "-")
    out = []
    if link.backend and link.backend.lower() not in _GPU_BACKENDS:
        out.append(f"the calibration's {level} fit was measured with {link.backend}, but GPU "
                   "training on this cluster communicates with NCCL: the fitted bandwidth "
                   "and latency describe another communication stack")
    device = _device_warning(f"the calibration's {level} fit", _devices(calibration, link), gpu)
    if device:
        out.append(device)
    if link.level == "intra_node" and link.ranks_per_node not in (1, node.gpus_per_node):
        out.append(f"the calibration's intra-node fit ran {link.ranks_per_node} ranks per node; "
                   f"this cluster's nodes have {node.gpus_per_node} GPUs")
    if link.level == "inter_node" and link.nics_per_node not in (None, node.nics):
        out.append(f"the calibration's nodes had {link.nics_per_node} NIC(s), this cluster's "
                   f"have {node.nics}: its inter-node figure is applied per NIC")
    return out


def _compute_warnings(scenario) -> list[str]:
    calibration, gpu = scenario.calibration, scenario.cluster.gpu
    if scenario.efficiency is not None:
        return []  # an efficiency given outright wins over the calibration's
    entry = calibration.compute_for(scenario.dtype)
    if entry is None:
        measured = [c for c in calibration.compute if c.efficiency is not None]
        if len(measured) != 1:
            return []
        entry = measured[0]
        out = [(f"the calibrated compute efficiency was measured in {entry.dtype}, applied to "
                f"{scenario.dtype}")]
    else:
        out = []
    device = _device_warning("the calibrated compute efficiency", [entry.device], gpu)
    return out + ([device] if device else [])


def calibration_scope(scenario) -> tuple[tuple[str, ...], tuple[tuple[str, str], ...]]:
    """``(warnings, assumptions)`` about ``scenario``'s calibration (empty without one)."""

    calibration = scenario.calibration
    if calibration is None:
        return (), ()
    node = scenario.cluster.node
    where = getattr(calibration, "path", "") or "the calibration"
    assumptions = [("calibration", f"{where}: {calibration.setup or 'setup not recorded'}")]
    inter = calibration.inter_node
    if inter is not None and scenario.cluster.nodes > 1:
        assumptions.append(("calibrated inter-node bandwidth", inter_node_bandwidth(inter, node.nics)[1]))
    if _is_measured(node.gpu):
        return (), tuple(assumptions)
    warnings = []
    for link in calibration.links:
        if link.level == "inter_node" and scenario.cluster.nodes < 2:
            continue
        if link.level == "intra_node" and node.gpus_per_node < 2:
            continue
        warnings += _link_warnings(calibration, link, node)
    warnings += _compute_warnings(scenario)
    return tuple(dict.fromkeys(warnings)), tuple(assumptions)
