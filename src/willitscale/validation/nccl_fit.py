"""Fit the constants of :data:`willitscale.collectives.nccl.run.ACHIEVED` to the fit rows.

Rows: every stable row of the *fit* side of nccl_tests.toml whose sweep is graded ``good``
(the grade was given with the data, before any constant; "doubtful" and "noisy" sweeps -- an
inferred machine, a configuration the source itself calls odd -- are reported, not fitted).
The pair is NCCL's pick by its own model; the fit adjusts only how long that pair takes.

Loss: the log of predicted over measured time, so a 64 kB row and a 4 GiB row weigh the same,
with a soft-L1 loss of scale 0.1 (errors beyond ~10% count linearly, so a sweep that disagrees
with the others pulls less than a squared loss lets it). Constants are positive (fitted as logs).
Algorithms with no fit row keep a bandwidth factor of 1.

``python -m willitscale.validation.nccl_fit`` prints the fitted :class:`Achieved` to paste.
"""

from __future__ import annotations

import numpy as np

from willitscale.collectives.nccl.run import Achieved, achieved_times, nccl_choice
from willitscale.collectives.nccl.tables import NcclAlgorithm
from willitscale.validation.nccl_check import OPS, _gpus_per_process, system_for
from willitscale.validation.nccl_tests import load_sweeps

__all__ = ["fit_achieved", "FITTED_ALGORITHMS"]

#: the algorithms the fit rows exercise (NCCL's pick on them); the others keep factor 1
FITTED_ALGORITHMS = (NcclAlgorithm.RING, NcclAlgorithm.TREE, NcclAlgorithm.NVLS, NcclAlgorithm.NVLS_TREE)
SOFT_L1_SCALE = 0.1


def _cases():
    """(choice, chosen pair per row, measured seconds, gpus per process) per fitted sweep."""
    out = []
    for sweep in load_sweeps():
        if sweep.split != "fit" or sweep.quality != "good":
            continue
        rows = [r for r in sweep.rows if r.stable]
        choice = nccl_choice(OPS[sweep.op], [r.size_bytes for r in rows], system_for(sweep),
                             gpus_per_process=_gpus_per_process(sweep))
        measured = np.array([r.time_us * 1e-6 for r in rows])
        out.append((choice, measured, _gpus_per_process(sweep)))
    return out


def _achieved(x: np.ndarray) -> Achieved:
    e = np.exp(x)
    return Achieved(latency_factor=(float(e[0]), float(e[1]), float(e[2])),
                    bandwidth_factor={a.value: float(v) for a, v in zip(FITTED_ALGORITHMS, e[3:7], strict=True)},
                    ramp=float(e[7]), ramp_width=float(e[8]), plugin_latency_factor=float(e[9]),
                    process_overhead=float(e[10]) * 1e-6,
                    source="fitted by willitscale.validation.nccl_fit on the good fit rows of "
                           "validation/nccl_tests.toml")


def _residuals(x, cases) -> np.ndarray:
    achieved = _achieved(x)
    out = []
    for choice, measured, gpp in cases:
        t = achieved_times(choice.pairs, choice.size, achieved, gpus_per_process=gpp)
        out.append(np.log(t[choice.index, np.arange(choice.size.size)] / measured))
    return np.concatenate(out)


def fit_achieved() -> tuple[Achieved, dict]:
    """The fitted constants and a summary (rows, rms of the log error)."""
    from scipy.optimize import least_squares

    cases = _cases()
    result = least_squares(_residuals, np.zeros(11), args=(cases,), loss="soft_l1", f_scale=SOFT_L1_SCALE)
    r = _residuals(result.x, cases)
    return _achieved(result.x), {"rows": int(r.size), "rms_log_error": float(np.sqrt(np.mean(r**2))),
                                 "sweeps": len(cases)}


def main() -> int:
    achieved, summary = fit_achieved()
    lf = ", ".join(f"{v:.4g}" for v in achieved.latency_factor)
    bf = ", ".join(f'"{k}": {v:.4g}' for k, v in achieved.bandwidth_factor.items())
    print(f"# {summary}")
    print(f"latency_factor=({lf}), bandwidth_factor={{{bf}}},")
    print(f"ramp={achieved.ramp:.4g}, ramp_width={achieved.ramp_width:.4g}, "
          f"plugin_latency_factor={achieved.plugin_latency_factor:.4g}, "
          f"process_overhead={achieved.process_overhead:.4g},")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
