#!/usr/bin/env bash
# Regenerate the figures of docs/reports.md from the current code: `bash docs/images/regenerate.sh`
# (needs the plot extra; the report screenshot needs Debian's chromium, else it is kept).
set -euo pipefail
cd "$(dirname "$0")/../.."
out=docs/images
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
ws=".venv/bin/willitscale"
[ -x "$ws" ] || ws=willitscale

# the handbook's 4-node job (Bekman's networking chapter): the report and its figures, swept over 1..16 nodes
"$ws" report examples/handbook-2b-4nodes.toml --html "$work/report.html" --plot "$work/figs" >/dev/null 2>&1
for name in timeline breakdown scaling comms-vs-compute; do
  cp "$work/figs/$name.png" "$out/$name.png"
done
# the requirements chart as `requirements` draws it: one curve per model size, one panel per link
"$ws" requirements examples/handbook-2b-4nodes.toml --params 2e9,20e9,200e9 --nodes 1..16 \
  --plot "$work/req" >/dev/null 2>&1
cp "$work/req/requirements.png" "$out/requirements.png"

# the top of the HTML report as headless Chromium renders it (960 px wide)
if command -v chromium >/dev/null 2>&1; then
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --hide-scrollbars --disable-extensions --mute-audio --user-data-dir="$work/profile" \
    --window-size=960,1100 --screenshot="$out/report.png" "file://$work/report.html" >/dev/null 2>&1
else
  echo "chromium not found: docs/images/report.png kept" >&2
fi
echo "regenerated: $(ls "$out"/*.png | tr '\n' ' ')"
