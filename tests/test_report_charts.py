"""The run page's acceptance-shape charts: a draft position is a whole number, so its axis
ticks only whole numbers (issue 41, item 4: not 1.0, 1.5, 2.0)."""

from __future__ import annotations

import re

from specperf.views import figures


def _x_ticks(svg: str) -> list[str]:
    """The x axis' tick labels, in order (each xtick group's text)."""
    axis = svg.split('axis_1">', 1)[1].split('axis_2">', 1)[0]
    return [found[0] for tick in axis.split("xtick_")[1:]
            if (found := re.findall(r">([^<>]+)</text>", tick))]


def test_draft_position_charts_tick_whole_positions_only():
    shape = {"positions": [0.9, 0.7, 0.5], "base_positions": [0.9, 0.72, 0.5],
             "positions_from": "response", "along": [], "base_along": []}
    (chart, _) = figures.shapes({"acceptance_shapes": {"padding-ctx13": shape}})
    ticks = _x_ticks(str(chart.svg))
    assert ticks == ["1", "2", "3"]
