"""The HTML report's page: one self-contained file (inline CSS, figures as data: URIs, no
scripts, no fonts or styles from the network). ``$name`` fields are filled by
:mod:`willitscale.report.html`, which escapes every user-supplied string first."""

from __future__ import annotations

__all__ = ["PAGE", "CSS"]

CSS = """
:root { --ink: #1d1d1f; --muted: #5f6368; --rule: #e3e3e3; --bg: #fafafa;
        --bad: #b2182b; --good: #1a7f37; --comms: #D55E00; --compute: #0072B2; }
* { box-sizing: border-box; }
body { margin: 0; background: var(--bg); color: var(--ink);
       font: 15px/1.5 -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
main { max-width: 1120px; margin: 0 auto; padding: 28px 24px 60px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 19px; margin: 36px 0 10px; padding-bottom: 4px; border-bottom: 1px solid var(--rule); }
.sub { color: var(--muted); margin: 0 0 18px; white-space: pre-line; }
.verdict { font-size: 17px; padding: 14px 18px; border-radius: 8px; background: #fff;
           border-left: 6px solid var(--good); box-shadow: 0 1px 2px rgba(0,0,0,.06); }
.verdict.bad { border-left-color: var(--bad); }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(112px, 1fr)); gap: 10px;
         margin: 16px 0 0; }
.card { background: #fff; border: 1px solid var(--rule); border-radius: 8px; padding: 10px 12px; }
.card b { display: block; font-size: 20px; }
.card span { color: var(--muted); font-size: 13px; }
ul.fixes li { margin: 4px 0; }
figure { margin: 18px 0; background: #fff; border: 1px solid var(--rule); border-radius: 8px;
         padding: 12px; }
figure img { display: block; max-width: 100%; height: auto; margin: 0 auto; }
figcaption { color: var(--muted); font-size: 13px; margin-top: 6px; }
table { border-collapse: collapse; width: 100%; background: #fff; font-size: 14px;
        font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 5px 10px; border-bottom: 1px solid var(--rule);
         vertical-align: top; }
th { background: #f2f2f2; font-weight: 600; }
td.num, th.num { text-align: right; }
td.num { white-space: nowrap; }
tr.here td { font-weight: 600; background: #fff8e6; }
.muted { color: var(--muted); }
code { background: #f0f0f0; padding: 1px 4px; border-radius: 4px; font-size: 13px;
       word-break: break-word; }
table.assumptions td:first-child { width: 24%; }
table.assumptions td { word-break: break-word; }
ul.fixes li:first-child { font-weight: 600; }
footer { margin-top: 40px; color: var(--muted); font-size: 13px; }
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="willitscale $version">
<title>$title</title>
<style>$css</style>
</head>
<body>
<main>
<h1>Will it scale? $title</h1>
<p class="sub">$summary</p>
<p class="verdict $verdict_class" id="verdict">$verdict</p>
<div class="cards">$cards</div>

<h2 id="change">What would change the verdict</h2>
$fixes

<h2 id="timeline">Where the time goes</h2>
$timeline_figure
$breakdown_table

<h2 id="scaling">How it scales</h2>
$scaling_figures
$scaling_table

<h2 id="network">The network it needs</h2>
$communication_table
$requirements_figure

<h2 id="memory">Memory per GPU</h2>
$memory_figure
$memory_table
$plans_section
<h2 id="inputs">Inputs</h2>
$inputs_table

<h2 id="assumptions">Assumptions and their sources</h2>
$assumptions_table
$unknowns

<footer>
<p>Made by willitscale $version with <code>$command</code>.
Formulas, derivations and sources: docs/estimate.md, docs/collectives.md, docs/hardware.md and
docs/reproductions.md in the willitscale repository. This file is self-contained: it needs no
network access to open.</p>
</footer>
</main>
</body>
</html>
"""
