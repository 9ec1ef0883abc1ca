"""A chart's caption names the baseline's line (dashed, or black ticks) exactly when the chart
draws one: a run with no baseline, or a shape the baseline did not record, says nothing of it."""

from __future__ import annotations

import re

import pytest

from specperf.views import page
from test_report import make_doc

FIGURE = re.compile(r'<figure class="plot" data-plot="([^"]+)">(.*?)<figcaption>(.*?)'
                    r"</figcaption>", re.S)
NAMES_BASELINE = ("dashed", "black ticks")


def _shapes(base: list[float]) -> dict:
    return {"padding-ctx13": {"positions": [0.9, 0.5], "base_positions": base,
                              "positions_from": "accept histogram", "along": [4.0, 3.5],
                              "base_along": base, "along_tokens": 100,
                              "along_from": "decode log"}}


def _figures(doc: dict) -> list[tuple[str, bool, str]]:
    """(kind, the drawing has a baseline series, caption) per figure of the page."""
    return [(kind, "baseline" in re.sub(r"<[^>]+>", " ", svg), caption)
            for kind, svg, caption in FIGURE.findall(page.render(doc))]


@pytest.mark.parametrize("with_baseline", [True, False])
def test_a_caption_names_the_baseline_only_when_the_chart_draws_it(with_baseline):
    doc = make_doc()
    doc["acceptance_shapes"] = _shapes([0.9, 0.6] if with_baseline else [])
    if not with_baseline:
        doc["baseline"] = None
    figures = _figures(doc)
    assert [kind for kind, _, _ in figures] == ["tok_s", "step_ms", "avg_commit", "positions",
                                                 "along"]
    for kind, drawn, caption in figures:
        assert drawn == with_baseline, kind
        assert any(word in caption for word in NAMES_BASELINE) == with_baseline, caption
