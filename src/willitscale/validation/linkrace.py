"""The A100 vs A800 case of Wei and Xia's lecture on distributed training frameworks: when NVLink, not RDMA, is the bottleneck.

Setup of the lecture: two 8-GPU servers, tensor parallelism over the 8 GPUs of each server,
pipeline parallelism across the two. Count the bytes of one backward step of one micro-batch
whose activations are ``X`` bytes:

* inside a server the tensor-parallel group all-reduces the input gradient, ``X`` bytes over
  ``t = 8`` GPUs: a ring sends ``2 (t - 1)/t x X = 1.75 X`` from **each GPU** over its NVLink
  port (:func:`willitscale.step.tensor.ring_allreduce_bytes_factor`);
* between the servers the gradient of the stage boundary goes back once: ``X`` bytes out of
  **the server**, each GPU sending ``X / t`` over its own NIC (Megatron's scatter/gather, or
  simply ``t`` ranks each owning a slice).

The two transfers take the same time when ``B_nvlink (per GPU) / B_rdma (per server) = 2 (t-1)/t``:
**1.75** at ``t = 8``: "NVLink must be 1.75x faster than RDMA". With one direction of each:

==========  ===================  ======================  =========  ==================
server      NVLink per GPU       RDMA per server         ratio      bottleneck (>= 1.75?)
==========  ===================  ======================  =========  ==================
DGX A100    300 GB/s (600 dup.)  8 x 200 Gb/s = 200 GB/s 1.50       NVLink
            300 GB/s             160 GB/s measured       1.875      RDMA (the lecture)
HGX A800    200 GB/s (400 dup.)  160 GB/s measured       1.25       NVLink (the lecture)
==========  ===================  ======================  =========  ==================

So the lecture's verdict for the A100 rests on comparing NVLink's **nominal** bandwidth with
RDMA's **measured** one (it quotes "typically measured 160 GBps" for the NICs only). Derating
NVLink the same way (our catalog's 0.80 for NVLink, measured on 'The Impact of GPU Networking (Part 1)' and DeepSeek-V3's
H800) gives 240 / 160 = 1.5: by this count the A100 is NVLink-bound too, only less than the
A800 (160 / 160 = 1.0). And the count itself
assumes one all-reduce per pipeline send: Megatron-LM issues two per layer in the backward
(and two more with full recomputation), so a stage of ``n`` layers puts ``2n x 1.75 X`` on each
GPU's NVLink for every ``X`` its server sends, and with ``n`` in the tens NVLink dominates on
both. :func:`model_case` gives those times from the estimate itself.
"""

from __future__ import annotations

from dataclasses import dataclass

from willitscale.estimation.estimate import estimate
from willitscale.step.tensor import ring_allreduce_bytes_factor

__all__ = ["LinkRace", "lecture_ratio", "lecture_case", "model_case"]


def lecture_ratio(tp: int = 8) -> float:
    """NVLink bytes per GPU / RDMA bytes per server for one TP all-reduce per pipeline send."""
    return float(ring_allreduce_bytes_factor(tp))


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkRace:
    """NVLink per GPU against RDMA per server, one direction, and which one limits."""

    nvlink: float  #: bytes/s per GPU
    rdma: float  #: bytes/s per server
    needed: float  #: the ratio NVLink / RDMA must reach (2 (t-1)/t)

    @property
    def ratio(self) -> float:
        return self.nvlink / self.rdma

    @property
    def bottleneck(self) -> str:
        return "RDMA" if self.ratio >= self.needed else "NVLink"


def lecture_case(node, *, rdma: float | None = None, derate_nvlink: bool = False,
                 tp: int = 8) -> LinkRace:
    """The lecture's comparison for a catalog node: its NVLink per GPU (nominal, or derated by
    the link's efficiency) against ``rdma`` bytes/s per server (default: its NICs' line rate)."""
    nvlink = node.intra_link.bandwidth * (node.intra_link.efficiency if derate_nvlink else 1.0)
    return LinkRace(nvlink=nvlink, rdma=node.inter_node_bandwidth if rdma is None else rdma,
                    needed=lecture_ratio(tp))


def model_case(scenario) -> dict[str, float]:
    """Seconds per step the estimate puts on each link for ``scenario`` (TP in the node, PP
    across): everything that stays in the node on NVLink (the TP all-reduces and the
    reassembly of scattered sends), the pipeline sends between nodes on RDMA."""

    est = estimate(scenario, allow_oom=True)
    busy = {"nvlink_s": 0.0, "rdma_s": 0.0}
    for op in est.comm_ops:
        if not op.leaves_node:
            busy["nvlink_s"] += op.time
        elif op.parallelism == "pp" and op.op == "send_recv":
            busy["rdma_s"] += op.time
    return busy
