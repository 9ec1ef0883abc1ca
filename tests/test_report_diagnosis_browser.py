"""The report's diagnosis in headless Chromium: a simulator whose acceptance falls late in the
output (``late_accept_mult``), measured by a whole perf session, shows its acceptance per draft
position and along the output as figures a person sees, and the page is screenshotted there."""

from __future__ import annotations

import re

import pytest
from PIL import Image

from browser import chromium, layout, needs_chromium
from slowb_runs import ran
from test_positions_e2e import late_fall, results

# Whole perf sessions against simulators: `pytest -m slow` (README: test commands).
pytestmark = [pytest.mark.slow, needs_chromium]

CASE = "reasoning-ctx1663"
WIDTH = 1280


@pytest.fixture(scope="module")
def diagnosed(start_sim, tmp_path_factory):
    """report.html of a run whose acceptance fell after output token 300, and its record: the
    positions test's run (test_positions_e2e.late_fall), made once for both."""
    folder, found = late_fall(start_sim, tmp_path_factory)
    ran(found["run"]).fnmatch_lines(["*Acceptance along the output changed shape*"])
    return next((folder / "r2").glob("*/report.html")), results(folder / "r2")


def test_positions_and_along_the_output_are_drawn_and_visible(diagnosed, tmp_path):
    page, doc = diagnosed
    figures = {box["plot"]: box for box in layout(page, 'figure[data-plot="positions"], '
                                                  'figure[data-plot="along"]', tmp=tmp_path,
                                                  width=WIDTH)}
    assert set(figures) == {"positions", "along"}, figures
    for box in figures.values():
        assert box["shown"], box
        assert box["svg_width"] > 200 and box["svg_height"] > 100, box  # drawn, not collapsed
        assert 0 <= box["left"] and box["right"] <= box["page_width"], box  # not clipped off
        assert "this run" in box["text"] and "baseline" in box["text"], box["text"]
    assert "draft position" in figures["positions"]["text"]
    assert "conditional acceptance rate" in figures["positions"]["text"]
    assert "output tokens" in figures["along"]["text"]
    assert f"{CASE}: tokens per verify step over each" in figures["along"]["text"]
    shape = doc["acceptance_shapes"][CASE]
    # the along-the-output curve the page draws is the one that fell late (test_positions_e2e)
    assert all(n < 0.75 * b for n, b in zip(shape["along"][3:], shape["base_along"][3:],
                                            strict=True)), shape
    # The page from its top down to the end of the two figures, as a person scrolls to them;
    # each figure's box on the screenshot holds its drawing, not a blank.
    height = int(max(box["top"] + box["height"] for box in figures.values())) + 24
    screenshot = tmp_path / "diagnosis.png"  # tests write only under tmp
    chromium(f"--screenshot={screenshot}", f"--window-size={WIDTH},{height}", page.as_uri(),
             tmp=tmp_path)
    with Image.open(screenshot) as image:
        assert image.size == (WIDTH, height)
        for box in figures.values():
            inked = _inked(image.crop((int(box["left"]), int(box["top"]), int(box["right"]),
                                       int(box["top"] + box["height"]))))
            assert inked > 0.02, (box["plot"], inked)  # axes, curves and labels drawn
    dom = chromium("--dump-dom", page.as_uri(), tmp=tmp_path).stdout
    sentence = re.search(r"Acceptance along the output changed shape[^<]*", dom)
    assert sentence and "late-output avg commit fell (tokens 300–600:" in sentence.group(0)
    print(f"screenshot: {screenshot}")


def _inked(region: Image.Image) -> float:
    """The share of a region's pixels darker than the page's near-white background."""
    levels = region.convert("L").histogram()  # pixels per grey level, 0 (black) to 255
    return sum(levels[:200]) / max(1, sum(levels))
