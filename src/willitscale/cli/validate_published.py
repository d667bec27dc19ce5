"""``willitscale validate --published``: the compute model against published training runs.

Every expressible row of the published-run set (docs/validation.md) predicted, its error, and
the summary (mean absolute, median, worst, bias) overall and by GPU, parallelism and dtype, for
the test rows (``--side test``, the default), the fit rows or all; rows no setting expresses are
listed with their reason. ``--markdown`` prints the tables docs/validation.md holds.
"""

from __future__ import annotations

import sys

__all__ = ["run_published"]


def _pct(x: float) -> str:
    return f"{x:+.1%}"


def _summary_rows(groups_, overall):
    rows = [["all", overall.rows, f"{overall.mean_abs:.1%}", f"{overall.median_abs:.1%}",
             _pct(overall.worst), _pct(overall.bias)]]
    for kind, buckets in groups_.items():
        for name, s in buckets.items():
            rows.append([f"{kind}: {name}", s.rows, f"{s.mean_abs:.1%}", f"{s.median_abs:.1%}",
                         _pct(s.worst), _pct(s.bias)])
    return rows


def _markdown(title, header, rows) -> str:
    out = [f"**{title}**", "", "| " + " | ".join(header) + " |",
           "|" + "---|" * len(header)]
    out += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(out) + "\n"


def run_published(args) -> int:
    from willitscale.cli.output import print_json, print_table
    from willitscale.validation.published import PUBLISHED_RUNS
    from willitscale.validation.published.errors import (
        groups,
        parallelism_of,
        row_errors,
        summary,
    )

    runs = [r for r in PUBLISHED_RUNS if args.side == "all" or r.side == args.side]
    errors = row_errors(runs)
    overall = summary(errors)
    by = groups(errors)
    missing = [r for r in runs if not r.expressible]
    if args.json:
        print_json({"side": args.side, "summary": overall.to_json() if overall else None,
                    "groups": {k: {n: s.to_json() for n, s in v.items()} for k, v in by.items()},
                    "rows": [{"id": e.run.id, "side": e.run.side, "gpu": e.run.gpu,
                              "dtype": e.run.dtype, "parallelism": parallelism_of(e.run),
                              "metric": e.run.metric, "published": e.run.published,
                              "predicted": e.predicted, "error": e.error, "mfu": e.mfu,
                              "mfu_causal_adjusted": e.mfu_causal, "quality": e.run.quality}
                             for e in errors],
                    "not_expressible": [{"id": r.id, "reason": r.not_expressible} for r in missing]})
        return 0
    header = ["row", "GPU", "dtype", "parallelism", "metric", "published", "ours", "error"]
    table = [[e.run.id, e.run.gpu, e.run.dtype, parallelism_of(e.run), e.run.metric,
              f"{e.run.published:.4g}", f"{e.predicted:.4g}", _pct(e.error)] for e in errors]
    sheader = ["rows", "n", "mean |error|", "median |error|", "worst", "bias"]
    srows = _summary_rows(by, overall) if overall else []
    if args.markdown:
        print(_markdown(f"{args.side} rows: error summary", sheader, srows))
        print(_markdown(f"{args.side} rows", header, table))
        print(_markdown("not expressible", ["row", "why"],
                        [[r.id, r.not_expressible] for r in missing]))
        return 0
    print_table(f"published runs, {args.side} rows: predicted vs published", header, table,
                caption="error = ours / published - 1 (for a step time published / ours - 1)")
    print_table("error summary", sheader, srows)
    for r in missing:
        print(f"{r.id}: not expressible: {r.not_expressible}", file=sys.stderr)
    return 0
