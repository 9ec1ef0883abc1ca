"""Headless Chromium for the report tests: screenshots and the rendered DOM of a page.

.ci/run installs Chromium from Debian (`apt-get install -y chromium`); a test that needs it
skips without it, and CI fails on any skip.
"""

from __future__ import annotations

import html
import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
needs_chromium = pytest.mark.skipif(
    not CHROMIUM.exists(), reason="headless Chromium not installed (apt-get install -y chromium)")


def chromium(*args: str, tmp: Path) -> subprocess.CompletedProcess[str]:
    """Run headless Chromium with a fresh profile under ``tmp``; raises if it fails."""
    profile = tmp / f"chrome-{len(list(tmp.glob('chrome-*')))}"
    return subprocess.run([str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120, check=True)


# Appended to a copy of the page: after layout, each element ``selector`` matches is
# described as JSON in <pre id="specperf-layout">, which --dump-dom then returns.
_LAYOUT_PROBE = """<script>
(() => {
  const out = [...document.querySelectorAll(%s)].map(el => {
    const box = el.getBoundingClientRect(), style = getComputedStyle(el);
    const svg = el.querySelector("svg"), art = svg ? svg.getBoundingClientRect() : null;
    return {plot: el.dataset.plot || "", width: box.width, height: box.height,
            left: box.left + scrollX, right: box.right + scrollX,
            top: box.top + scrollY, page_width: document.documentElement.scrollWidth,
            shown: style.display !== "none" && style.visibility === "visible"
                   && Number(style.opacity) > 0 && el.getClientRects().length > 0,
            svg_width: art ? art.width : 0, svg_height: art ? art.height : 0,
            text: el.textContent};
  });
  const pre = document.createElement("pre");
  pre.id = "specperf-layout";
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>"""


def layout(page: Path, selector: str, *, tmp: Path, width: int = 1280) -> list[dict[str, Any]]:
    """How Chromium lays out each element ``selector`` matches on ``page`` (a copy under
    ``tmp`` is probed, the page itself is left alone): its box in page pixels, whether its
    computed style shows it, its first SVG's size and its text."""
    probe = tmp / f"layout-{len(list(tmp.glob('layout-*')))}-{page.name}"
    probe.write_text(page.read_text().replace(
        "</body>", _LAYOUT_PROBE % json.dumps(selector) + "</body>"))
    dom = chromium("--dump-dom", f"--window-size={width},1000", probe.as_uri(), tmp=tmp).stdout
    found = re.search(r'<pre id="specperf-layout">(.*?)</pre>', dom, re.S)
    assert found, f"the layout probe did not run on {page}"
    boxes: list[dict[str, Any]] = json.loads(html.unescape(found.group(1)))
    return boxes
