"""The figures of reports: matplotlib drawings as inline SVG elements.

Figures are drawn on matplotlib's object API with the Agg canvas (no pyplot, no global
backend switch, safe inside any pytest run) and saved as SVG with real ``<text>``
elements, so axis labels are searchable and every figure's ids are prefixed so several
SVGs can live in one HTML document. Matplotlib escapes the text it writes into SVG.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from ..core.model import ContextFit

if TYPE_CHECKING:  # matplotlib loads when a figure is drawn: pytest workers never draw
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

Series = Mapping[str, Sequence[tuple[float, float]]]
_RC: dict[Any, Any] = {"svg.fonttype": "none", "svg.hashsalt": "specperf", "font.size": 9.0,
       "axes.grid": True, "grid.alpha": 0.3}
_ID = re.compile(r'\bid="([^"]+)"')
_LEGEND_MAX = 24  # beyond this many series a legend hides the plot; the tables name them
BASE_LINE, BASE_ALPHA = "--", 0.6  # the baseline: dashed and lighter than this run


# The trend's run ids, cells and boundaries are cut to this many characters: longer ones
# squeeze its axes to nothing; the page's tables under the plot hold them whole.
_TREND_LABEL_MAX = 40
_TREND_TICKS = 16  # at most this many run labels under a trend plot: more overlap
_MARKERS = "osD^vP*Xhp<>"  # a trend cell's marker when colour names the deployment


def _label(text: str, limit: int | None = None) -> str:
    # A '$' would switch matplotlib to mathtext; names from servers and users are literal.
    short = text if limit is None or len(text) <= limit else text[:limit - 1] + "\u2026"
    return short.replace("$", r"\$")


def _style() -> AbstractContextManager[Any]:
    import matplotlib

    return matplotlib.rc_context(_RC)


def _figure(width: float = 7.0) -> tuple[Figure, Axes]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, 3.6), layout="constrained")
    FigureCanvasAgg(fig)
    return fig, fig.subplots()


def to_svg(fig: Figure, prefix: str) -> str:
    """The figure as an inline ``<svg>`` element whose ids all start with ``prefix``."""
    buf = io.StringIO()
    with _style():
        fig.savefig(buf, format="svg", metadata={"Date": None})  # same input, same bytes
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    ids = set(_ID.findall(text))
    text = _ID.sub(lambda m: f'id="{prefix}-{m.group(1)}"', text)
    return re.sub(r'(#)([A-Za-z_][\w.-]*)',
                  lambda m: f"#{prefix}-{m.group(2)}" if m.group(2) in ids else m.group(0), text)


def _finish(ax: Axes, xlabel: str, ylabel: str, title: str, n_series: int,
            outside: bool = False) -> None:
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    if 0 < n_series <= _LEGEND_MAX and (outside or n_series > 8):
        ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
    elif 0 < n_series <= _LEGEND_MAX:
        ax.legend(loc="best", fontsize=7)


def _colour(i: int) -> str:
    return f"C{i % 10}"


def context_plot(prefix: str, title: str, ylabel: str, current: Series,
                 baseline: Series) -> str:
    """A metric against context, one line per text class; the baseline dashed beside it."""
    with _style():
        fig, ax = _figure()
        for i, (name, points) in enumerate(sorted(current.items())):
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", color=_colour(i), label=_label(name))
            base = sorted(baseline.get(name, ()))
            if base:
                bx, by = zip(*base, strict=True)
                ax.plot(bx, by, marker="s", fillstyle="none", color=_colour(i),
                        label=_label(f"{name} baseline"), linestyle=BASE_LINE, alpha=BASE_ALPHA)
        _finish(ax, "context (prompt tokens)", ylabel, title, len(current) * 2)
        return to_svg(fig, prefix)


def fit_plot(prefix: str, points: Series, fits: Mapping[str, ContextFit],
             base_fits: Mapping[str, ContextFit]) -> str:
    """Step time against mean context: measured medians, this run's fit and the baseline's."""
    with _style():
        fig, ax = _figure()
        top = max((x for pts in points.values() for x, _ in pts), default=1.0)
        grid = [0.0, top * 1.05]
        for i, (name, pts) in enumerate(sorted(points.items())):
            xs, ys = zip(*sorted(pts), strict=True)
            ax.plot(xs, ys, "o", color=_colour(i), label=_label(f"{name} measured"))
            if name in fits:
                ax.plot(grid, [fits[name].predict_step_ms(x) for x in grid], color=_colour(i),
                        label=_label(f"{name} fit {_fit_text(fits[name])}"))
            if name in base_fits:
                ax.plot(grid, [base_fits[name].predict_step_ms(x) for x in grid],
                        color=_colour(i), label=_label(f"{name} baseline fit "
                                                       f"{_fit_text(base_fits[name])}"),
                        linestyle=BASE_LINE, alpha=BASE_ALPHA)
        _finish(ax, "mean context during decode (prompt + output/2, tokens)", "step time (ms)",
                "Verify step time vs context", len(points) * 3)
        return to_svg(fig, prefix)


def _fit_text(fit: ContextFit) -> str:
    return f"({fit.a_ms:.1f} + {fit.b_ms_per_1k:.2f} ms/1k)"


def bar_plot(prefix: str, values: Mapping[str, Mapping[int, float]],
             baseline: Mapping[str, Mapping[int, float]]) -> str:
    """Avg commit per text class at each context; baseline medians as black ticks."""
    contexts = sorted({c for per in values.values() for c in per})
    names = sorted(values)
    with _style():
        fig, ax = _figure()
        width = 0.8 / max(1, len(names))
        for i, name in enumerate(names):
            xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(contexts))]
            ys = [values[name].get(c, float("nan")) for c in contexts]
            ax.bar(xs, ys, width=width * 0.95, color=_colour(i), label=_label(name))
            base = [baseline.get(name, {}).get(c, float("nan")) for c in contexts]
            if any(b == b for b in base):  # any non-NaN
                ax.plot(xs, base, "_", color="black", markersize=12, markeredgewidth=2,
                        label="baseline" if i == 0 else None)
        ax.set_xticks(range(len(contexts)), [str(c) for c in contexts],
                      rotation=90 if len(contexts) > 12 else 0)
        _finish(ax, "context (prompt tokens)", "avg commit (tokens per verify step)",
                "Acceptance per text class and context", len(names) + 1)
        return to_svg(fig, prefix)


def concurrency_plot(prefix: str, title: str, ylabel: str,
                     series: Mapping[str, Sequence[tuple[float, float]]]) -> str:
    """Figures against concurrency C, one line per series (e.g. per user and aggregate)."""
    with _style():
        fig, ax = _figure()
        for i, (name, points) in enumerate(series.items()):
            if not points:
                continue
            xs, ys = zip(*sorted(points), strict=True)
            ax.plot(xs, ys, marker="o", color=_colour(i), label=_label(name))
        levels = sorted({x for points in series.values() for x, _ in points})
        ax.set_xticks(levels, [f"{x:g}" for x in levels])
        _finish(ax, "concurrency C (requests in the batch)", ylabel, title, len(series))
        return to_svg(fig, prefix)


def trend_plot(prefix: str, ylabel: str, runs: Sequence[str],
               series: Mapping[str, Sequence[float | None]],
               boundaries: Iterable[tuple[int, str]],
               deployments: Sequence[str] | None = None) -> str:
    """One metric per cell over past runs (x: ``runs``' short labels, thinned to at most
    :data:`_TREND_TICKS`, slanted); boundaries as dotted lines tagged B1, B2, … (their text
    is listed on the page). With ``deployments`` (each run's), each deployment is its own
    series in its own colour, each cell its own marker, and the legend names both."""
    from matplotlib.lines import Line2D

    names = list(dict.fromkeys(deployments or ()))
    colour_of = {name: _colour(j) for j, name in enumerate(names)}
    groups: list[str | None] = [*names] or [None]  # None: one deployment, a colour per cell
    with _style():
        fig, ax = _figure(width=9.0)
        for i, (name, ys) in enumerate(sorted(series.items())):
            marker = _MARKERS[i % len(_MARKERS)] if names else "o"
            for dep in groups:
                pts = [(x, y) for x, y in enumerate(ys) if y is not None
                       and (dep is None or (deployments or ())[x] == dep)]
                if not pts:
                    continue
                xs, vs = zip(*pts, strict=True)
                ax.plot(xs, vs, marker=marker, markersize=4,
                        color=colour_of[dep] if dep is not None else _colour(i),
                        label=None if dep is not None else _label(name, _TREND_LABEL_MAX))
        for n, (x, _) in enumerate(boundaries, 1):
            colour = colour_of.get((deployments or ())[x], "grey") if names else "grey"
            ax.axvline(x - 0.5, color=colour, linestyle=":")
            ax.annotate(f"B{n}", (x - 0.5, 1.0), xycoords=("data", "axes fraction"),
                        xytext=(2, -2), textcoords="offset points", va="top", ha="left",
                        fontsize=7, color="dimgrey")
        ax.set_xlim(-0.7, len(runs) - 0.3)
        step = max(1, -(-len(runs) // _TREND_TICKS))
        ticks = sorted(range(len(runs) - 1, -1, -step))  # counted back from the newest run
        ax.set_xticks(ticks, [_label(runs[t], _TREND_LABEL_MAX) for t in ticks], rotation=40,
                      ha="right", rotation_mode="anchor", fontsize=7)
        if names:
            handles = [Line2D([], [], color=colour_of[d], label=_label(f"deployment {d}",
                                                                        _TREND_LABEL_MAX))
                       for d in names]
            handles += [Line2D([], [], color="dimgrey", marker=_MARKERS[i % len(_MARKERS)],
                               linestyle="none", label=_label(cell, _TREND_LABEL_MAX))
                        for i, cell in enumerate(sorted(series))]
            ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=7)
            _finish(ax, "run (started)", ylabel, f"{ylabel} per cell over runs", 0)
        else:
            _finish(ax, "run (started)", ylabel, f"{ylabel} per cell over runs", len(series),
                    outside=True)
        return to_svg(fig, prefix)


def shape_plot(prefix: str, title: str, xlabel: str, ylabel: str,
               current: Sequence[float | None], baseline: Sequence[float | None],
               xs: Sequence[float], integer_x: bool = False) -> str:
    """One case's acceptance profile (per draft position, or along the output) at ``xs``:
    this run solid, the baseline dashed; None values are gaps. ``integer_x``: the x axis
    ticks whole numbers only (draft positions: there is no position 1.5)."""
    with _style():
        fig, ax = _figure(width=4.6)
        for values, style in ((current, {"label": "this run", "marker": "o"}),
                              (baseline, {"label": "baseline", "marker": "s",
                                          "fillstyle": "none", "linestyle": BASE_LINE,
                                          "alpha": BASE_ALPHA})):
            ys = [float("nan") if v is None else v for v in values]
            if any(y == y for y in ys):
                ax.plot(xs[:len(ys)], ys, color=_colour(0), **style)
        ax.set_ylim(bottom=0)
        if integer_x:
            from matplotlib.ticker import MaxNLocator

            ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        _finish(ax, xlabel, ylabel, _label(title), 2)
        return to_svg(fig, prefix)


def band_plot(prefix: str, title: str, curve: Sequence[Mapping[str, float]],
              points: Sequence[tuple[float, float]], observed: tuple[float, float],
              predicted: tuple[float, float, float]) -> str:
    """tok/s against prompt context: the baseline's prediction with its band, the baseline's
    measured cases, and one observation (``specperf explain``, views/explaincard.py)."""
    with _style():
        fig, ax = _figure(width=6.4)
        xs = [p["context"] for p in curve]
        ax.fill_between(xs, [p["low"] for p in curve], [p["high"] for p in curve],
                        color=_colour(0), alpha=0.18, label="predicted band (95 %)")
        ax.plot(xs, [p["tok_s"] for p in curve], color=_colour(0), label="predicted")
        if points:
            px, py = zip(*points, strict=True)
            ax.plot(px, py, "s", fillstyle="none", color=_colour(0), alpha=BASE_ALPHA,
                    label="baseline cases")
        ctx, low, high = predicted
        ax.errorbar([ctx], [(low + high) / 2], yerr=[[(high - low) / 2]], color="grey",
                    capsize=4, linestyle="none")
        ax.plot([observed[0]], [observed[1]], "o", color="C3", markersize=8, label="observed")
        ax.set_ylim(bottom=0)
        _finish(ax, "context (prompt tokens)", "tok/s per request", _label(title), 4)
        return to_svg(fig, prefix)
