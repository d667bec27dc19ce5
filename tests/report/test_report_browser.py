"""The HTML report in a real browser: headless Chromium loads the file, every chart renders (no
broken image, no console error), and a screenshot is saved.

Chromium is Debian's ``chromium`` package (``scripts/test.sh`` installs it when running as root);
without it the test skips. The machine has no network, so the flags turn off everything that
would try to reach one. A small probe script is added to a *copy* of the report (the report
itself has no script): it records each image's decoded size and rendered box, every error and
console.error, and the page height into a ``<pre>`` that ``--dump-dom`` prints after load.

Set ``WILLITSCALE_SCREENSHOT_DIR`` to also copy the screenshot there (e.g. ``out/``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--hide-scrollbars", "--disable-extensions", "--mute-audio")
WIDTH = 1280

PROBE = """<script>
window.__wisErrors = [];
window.addEventListener("error", function (e) {
  var what = e.target && e.target.tagName ? e.target.tagName + " failed to load" : e.message;
  window.__wisErrors.push(String(what));
}, true);
(function () {
  var original = console.error;
  console.error = function () {
    window.__wisErrors.push(Array.prototype.join.call(arguments, " "));
    original.apply(console, arguments);
  };
})();
window.addEventListener("load", function () {
  var images = Array.prototype.map.call(document.images, function (img) {
    var box = img.getBoundingClientRect();
    return {alt: img.alt, complete: img.complete, naturalWidth: img.naturalWidth,
            naturalHeight: img.naturalHeight, width: box.width, height: box.height};
  });
  var probe = document.createElement("pre");
  probe.id = "wis-probe";
  probe.textContent = JSON.stringify({
    images: images, figures: document.querySelectorAll("figure").length,
    errors: window.__wisErrors, height: document.documentElement.scrollHeight,
    verdict: (document.getElementById("verdict") || {}).textContent || ""});
  document.body.appendChild(probe);
});
</script>"""


def _chromium() -> str:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None and Path("/usr/bin/chromium").exists():
        exe = "/usr/bin/chromium"
    if exe is None:
        pytest.skip("chromium is not installed (apt-get install chromium; scripts/test.sh does "
                    "it when run as root)")
    return exe


def _run(exe: str, profile: Path, *args: str) -> str:
    proc = subprocess.run([exe, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=90)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def _probe(exe: str, page: Path, profile: Path) -> dict:
    probed = page.with_name("probed.html")
    probed.write_text(page.read_text(encoding="utf-8").replace("<head>", "<head>" + PROBE, 1),
                      encoding="utf-8")
    dom = _run(exe, profile, f"--window-size={WIDTH},900", "--dump-dom", probed.as_uri())
    found = re.search(r'<pre id="wis-probe">(.*?)</pre>', dom, re.S)
    assert found, "the probe did not run: the page did not finish loading"
    import html

    return json.loads(html.unescape(found.group(1)))


def test_report_renders_in_headless_chromium(acceptance_html, tmp_path):
    exe = _chromium()
    profile = tmp_path / "profile"  # a fresh profile: no state from other runs
    result = _probe(exe, acceptance_html, profile)

    assert result["errors"] == []
    images = result["images"]
    # the acceptance asks for at least a timeline, a breakdown and a scaling chart
    alts = " | ".join(i["alt"] for i in images)
    for wanted in ("training step", "step time goes", "scaling efficiency"):
        assert wanted in alts
    assert len(images) == result["figures"] >= 3
    for image in images:  # decoded (not broken) and laid out with a real size
        assert image["complete"] and image["naturalWidth"] > 300 and image["naturalHeight"] > 100, image
        assert image["width"] > 300 and image["height"] > 100, image
    assert "inter-node network is the bottleneck" in result["verdict"]

    height = min(int(result["height"]), 16000)
    shot = tmp_path / "report.png"
    _run(exe, profile, f"--window-size={WIDTH},{height}", f"--screenshot={shot}",
         acceptance_html.as_uri())
    from matplotlib.image import imread

    pixels = imread(shot)
    assert pixels.shape[:2] == (height, WIDTH)
    assert pixels.std() > 0.05  # not a blank page
    target = os.environ.get("WILLITSCALE_SCREENSHOT_DIR")
    if target:
        Path(target).mkdir(parents=True, exist_ok=True)
        shutil.copy(shot, Path(target) / "report.png")
        shutil.copy(acceptance_html, Path(target) / "report.html")


def test_a_report_with_the_planners_plans_renders(tmp_path):
    # a model with a shape and no parallel layout: the report adds the planner's best plans
    # (tests/report/test_report_plans.py checks the contents; here, that the page renders)
    exe = _chromium()
    from willitscale.cli.main import main

    page = tmp_path / "plans.html"
    assert main(["report", "--model", "gpt2-xl", "--gpu", "h100", "--nodes", "4",
                 "--gpus-per-node", "8", "--inter-node", "100Gbps", "--seq-len", "1024",
                 "--global-batch", "256", "--html", str(page)]) == 0
    result = _probe(exe, page, tmp_path / "profile")
    assert result["errors"] == []
    plans = [i for i in result["images"] if i["alt"] == "Best parallel plans"]
    assert len(plans) == 1
    assert plans[0]["complete"] and plans[0]["naturalWidth"] > 300 and plans[0]["height"] > 100


def test_the_probe_catches_a_broken_chart_and_a_console_error(tmp_path):
    # the check above must be able to fail: a corrupt image and a console error are reported
    exe = _chromium()
    page = tmp_path / "broken.html"
    page.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"></head><body>'
                    '<figure><img alt="broken" src="data:image/png;base64,AAAA"></figure>'
                    '<img alt="fine" width="4" height="4" src="data:image/svg+xml;base64,'
                    'PHN2ZyB4bWxucz0iaHR0cDovL3d3dy53My5vcmcvMjAwMC9zdmciIHdpZHRoPSI0IiBoZWln'
                    'aHQ9IjQiLz4="><script>console.error("boom")</script></body></html>')
    result = _probe(exe, page, tmp_path / "profile")
    by_alt = {i["alt"]: i for i in result["images"]}
    assert by_alt["broken"]["naturalWidth"] == 0 and by_alt["fine"]["naturalWidth"] == 4
    assert "boom" in result["errors"] and "IMG failed to load" in result["errors"]
