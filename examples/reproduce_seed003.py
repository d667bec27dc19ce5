"""Print seeds/003's two-GPU epoch times beside our predictions (docs/reproductions.md).

    python examples/reproduce_seed003.py
"""

from willitscale.cli.output import print_table
from willitscale.validation.reproduce import seed003_rows

print_table(
    "The Impact of GPU Networking: DDP epoch time, predicted from the measured single-GPU step",
    ["model", "nodes x GPUs", "communication", "predicted", "measured", "error"],
    [(r.model, f"{r.nodes} x {r.gpus_per_node}", r.assumptions, f"{r.predicted_s:.1f}",
      f"{r.measured_s:.2f}", f"{100 * r.error:+.1f}%") for r in seed003_rows()],
    units=["", "", "", "s", "s", ""],
    caption="defaults: catalog links; measured: the article's all-reduce (0.0166 s NVLink, "
            "0.1218 s HDR for 1.32 GiB); calibrated: Baskerville preset (HDR efficiency fitted to "
            "it)",
)
