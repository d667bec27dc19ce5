"""The NCCL model against the published nccl-tests sweeps: one prediction per published row.

:func:`system_for` turns a sweep's ``setup`` (catalog preset, nodes, ranks per node, the NIC
the source states) into the :class:`~willitscale.collectives.nccl_system.NcclSystem` NCCL would
see; :func:`predict_rows` predicts every stable row of one side; :func:`band_errors` summarises
them per size band as docs/collectives.md reports them (busbw from 1 MiB up, time below).

``python -m willitscale.validation.nccl_check [fit|test]`` prints the table.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import numpy as np

from willitscale.collectives.metrics import busbw_factor
from willitscale.collectives.nccl import ACHIEVED, Achieved, nccl_choice
from willitscale.collectives.nccl_node import nccl_system
from willitscale.collectives.ops import Op
from willitscale.hardware import get_link, get_node
from willitscale.validation.nccl_tests import BANDS, MiB, Row, Sweep, load_sweeps

__all__ = ["Prediction", "band_errors", "predict_rows", "system_for", "OPS"]

OPS = {"all_reduce": Op.ALL_REDUCE, "all_gather": Op.ALL_GATHER, "sendrecv": Op.SEND_RECV,
       "reduce_scatter": Op.REDUCE_SCATTER}


@dataclass(frozen=True, slots=True, kw_only=True)
class Prediction:
    sweep: Sweep
    row: Row
    pair: str  #: the (algorithm/protocol) NCCL's model picks
    time: float  #: achieved seconds
    nccl_model_time: float  #: NCCL's own predicted seconds

    @property
    def busbw_GBps(self) -> float:
        return self.row.size_bytes / self.time * busbw_factor(OPS[self.sweep.op], self.sweep.ranks) / 1e9

    @property
    def error(self) -> float:
        """busbw error from 1 MiB up, time error below (rule 6 of the split)."""
        if self.row.size_bytes >= MiB:
            return self.busbw_GBps / self.row.busbw_GBps - 1
        return self.time / (self.row.time_us * 1e-6) - 1


def system_for(sweep: Sweep):
    """The communicator the sweep ran, as NCCL sees it (its setup; no numbers are read)."""
    st = sweep.setup
    node = get_node(st.preset)
    if st.nic:
        node = replace(node, nic=get_link(st.nic), nics=st.nics, nccl_net_devices=0)
    if st.ranks_per_node != node.gpus_per_node:
        node = replace(node, gpus_per_node=st.ranks_per_node,
                       board_gpus=max(node.board_gpus, st.ranks_per_node))
    system, _ = nccl_system(node, ranks=sweep.ranks, ranks_per_node=st.ranks_per_node, collnet=st.collnet)
    return system


def _gpus_per_process(sweep: Sweep) -> int:
    st = sweep.setup
    return st.ranks_per_node // st.processes if st.processes else 1


def predict_sweep(sweep: Sweep, achieved: Achieved = ACHIEVED) -> list[Prediction]:
    rows = [r for r in sweep.rows if r.stable]
    if not rows:
        return []
    choice = nccl_choice(OPS[sweep.op], [r.size_bytes for r in rows], system_for(sweep),
                         algorithm=sweep.setup.algorithm, gpus_per_process=_gpus_per_process(sweep),
                         achieved=achieved)
    k = np.arange(len(rows))
    return [Prediction(sweep=sweep, row=r, pair=choice.pairs[int(choice.index[i])].name,
                       time=float(choice.time[i]), nccl_model_time=float(choice.predicted[choice.index[i], i]))
            for i, r in zip(k, rows, strict=True)]


def predict_rows(side: str, achieved: Achieved = ACHIEVED, *, quality: str | None = None) -> list[Prediction]:
    """Predictions for every stable row of ``side`` ("fit" or "test"), optionally one quality."""
    out = []
    for sweep in load_sweeps():
        if sweep.split == side and (quality is None or sweep.quality == quality):
            out += predict_sweep(sweep, achieved)
    return out


def band_errors(predictions) -> dict[str, dict]:
    """Per band: rows, mean |error|, worst error (signed) and the row it comes from."""
    out = {}
    for name, lo, hi in BANDS:
        chosen = [p for p in predictions if lo <= p.row.size_bytes < hi]
        if not chosen:
            out[name] = {"rows": 0}
            continue
        errors = np.array([p.error for p in chosen])
        worst = int(np.argmax(np.abs(errors)))
        out[name] = {"rows": len(chosen), "mean_abs": float(np.mean(np.abs(errors))),
                     "worst": float(errors[worst]), "worst_row": f"{chosen[worst].sweep.id} "
                     f"{chosen[worst].row.size_bytes} B", "metric": "time" if hi <= MiB else "busbw"}
    return out


def main(argv=None) -> int:
    side = (argv or sys.argv[1:] or ["test"])[0]
    predictions = predict_rows(side)
    print(f"{side} rows: error per size band (busbw from 1 MiB up, time below)")
    for name, e in band_errors(predictions).items():
        if e["rows"]:
            print(f"  {name:>13}: {e['rows']:4d} rows  mean |error| {e['mean_abs']:6.1%}  "
                  f"worst {e['worst']:+7.1%}  ({e['worst_row']})")
    big = [p for p in predictions if p.row.size_bytes >= MiB]
    errors = np.abs([p.error for p in big])
    print(f"  from 1 MiB up: {len(big)} rows, mean |error| {errors.mean():.1%}, worst {errors.max():.1%}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
