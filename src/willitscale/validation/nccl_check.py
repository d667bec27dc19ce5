"""The NCCL model against the published nccl-tests sweeps: one prediction per published row.

:func:`system_for` turns a sweep's ``setup`` (catalog preset, nodes, ranks per node, the NIC
the source states) into the :class:`~willitscale.collectives.nccl.system.NcclSystem` NCCL would
see; :func:`predict_rows` predicts every stable row of one side; :func:`band_errors` summarises
them per size band as docs/collectives.md reports them (busbw from 1 MiB up, time below).

``willitscale validate --nccl-tests [--side fit|test] [--quality all|good]`` (or
``python -m willitscale.validation.nccl_check [fit|test] [all|good]``) prints the table.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, replace

import numpy as np

from willitscale.collectives.metrics import busbw_factor
from willitscale.collectives.nccl.env import parse_nccl_env
from willitscale.collectives.nccl.run import ACHIEVED, Achieved, nccl_choice
from willitscale.collectives.nccl_node import nccl_system
from willitscale.collectives.ops import Op
from willitscale.errors import ConfigError
from willitscale.hardware import get_link, get_node
from willitscale.validation.nccl_tests import BANDS, MiB, Row, Sweep, load_sweeps

__all__ = ["Prediction", "band_errors", "error_summary", "predict_rows", "report_lines", "system_for",
           "validation_report", "OPS", "QUALITIES"]

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
    """The communicator the sweep ran, as NCCL sees it (its setup, the NCCL settings it states;
    no numbers are read)."""
    st = sweep.setup
    node = get_node(st.preset)
    if st.nic:
        node = replace(node, nic=get_link(st.nic), nics=st.nics, nccl_net_devices=0)
    if st.ranks_per_node != node.gpus_per_node:
        node = replace(node, gpus_per_node=st.ranks_per_node,
                       board_gpus=max(node.board_gpus, st.ranks_per_node))
    system, _ = nccl_system(node, ranks=sweep.ranks, ranks_per_node=st.ranks_per_node, collnet=st.collnet,
                            env=parse_nccl_env(dict(st.nccl_env)))
    return system


def _gpus_per_process(sweep: Sweep) -> int:
    st = sweep.setup
    return st.ranks_per_node // st.processes if st.processes else 1


def predict_sweep(sweep: Sweep, achieved: Achieved = ACHIEVED) -> list[Prediction]:
    rows = [r for r in sweep.rows if r.stable]
    if not rows:
        return []
    choice = nccl_choice(OPS[sweep.op], [r.size_bytes for r in rows], system_for(sweep),
                         gpus_per_process=_gpus_per_process(sweep),
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


def error_summary(errors) -> dict:
    """rows, mean / median |error|, worst (signed) and bias (mean signed error) of ``errors``."""
    e = np.asarray(list(errors), dtype=float)
    if not e.size:
        return {"rows": 0}
    worst = int(np.argmax(np.abs(e)))
    return {"rows": int(e.size), "mean_abs": float(np.mean(np.abs(e))),
            "median_abs": float(np.median(np.abs(e))), "worst": float(e[worst]),
            "bias": float(np.mean(e)), "worst_index": worst}


def band_errors(predictions) -> dict[str, dict]:
    """Per band (and ``"from 1 MiB up"``, the acceptance metric): :func:`error_summary` of the
    errors, the row of the worst one and the metric (time below 1 MiB, busbw from 1 MiB up)."""
    out = {}
    groups = [(name, lo, hi) for name, lo, hi in BANDS] + [("from 1 MiB up", MiB, np.inf)]
    for name, lo, hi in groups:
        chosen = [p for p in predictions if lo <= p.row.size_bytes < hi]
        summary = error_summary(p.error for p in chosen)
        if summary["rows"]:
            w = chosen[summary.pop("worst_index")]
            summary["worst_row"] = f"{w.sweep.id} {w.row.size_bytes} B"
            summary["metric"] = "time" if hi <= MiB else "busbw"
        out[name] = summary
    return out


QUALITIES = ("all", "good")


def validation_report(side: str = "test", quality: str = "all") -> dict:
    """The errors per band of one side (``quality="good"``: only the sweeps graded good when
    the data was collected, before any constant), with the sweeps it covers."""
    if quality not in QUALITIES:
        raise ConfigError("quality", quality, " or ".join(QUALITIES))
    predictions = predict_rows(side, quality=None if quality == "all" else quality)
    sweeps = sorted({p.sweep.id for p in predictions})
    return {"side": side, "quality": quality, "sweeps": len(sweeps), "bands": band_errors(predictions),
            "model": "NCCL v2.30.7 tuning model (pick) + achieved-time constants fitted on the good "
                     "fit rows (willitscale.validation.nccl_fit)"}


def report_lines(report: dict) -> list[str]:
    """The report as text, one line per band."""
    quality = "every sweep" if report["quality"] == "all" else "sweeps graded good"
    out = [f"{report['side']} rows ({quality}, {report['sweeps']} sweeps): error = predicted / "
           "published - 1, busbw from 1 MiB up, time below"]
    for name, e in report["bands"].items():
        if not e["rows"]:
            out.append(f"  {name:>13}: no rows")
            continue
        out.append(f"  {name:>13}: {e['rows']:4d} rows  mean |error| {e['mean_abs']:6.1%}  median "
                   f"{e['median_abs']:6.1%}  bias {e['bias']:+7.1%}  worst {e['worst']:+8.1%} "
                   f"({e['worst_row']})")
    return out


def main(argv=None) -> int:
    args = argv or sys.argv[1:] or ["test"]
    side, quality = args[0], (args[1] if len(args) > 1 else "all")
    print("\n".join(report_lines(validation_report(side, quality))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
