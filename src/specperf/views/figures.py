"""The run page's charts: which figures a results document gets, drawn by plots.py, and
captions that say what each chart draws (the baseline's line only when there is one)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..core.model import ContextFit
from ..record.readers import baseline_metrics, mean_context, median
from .plots import bar_plot, concurrency_plot, context_plot, fit_plot, shape_plot
from .template import Figure, figure


def base_median(doc: Mapping[str, Any], data: Mapping[str, Any], metric: str) -> float | None:
    """The baseline's median of a case's metric, if it measured the same case."""
    entry = baseline_metrics(doc, data["case"]).get(metric)
    return None if entry is None else float(entry["median"])


# -- the plots -----------------------------------------------------------------------------------
Points = dict[str, list[tuple[float, float]]]
BASELINE_DASHED = "; dashed: the baseline"


def context(doc: Mapping[str, Any]) -> list[Figure]:
    """tok/s, step time and avg commit against context; a caption names the baseline's line
    only when the chart draws one."""
    tok, tok_base, step, commit, commit_base = _plot_data(doc)
    base = doc["baseline"] or {}
    dashed = BASELINE_DASHED if any(tok_base.get(name) for name in tok) else ""
    out = [figure("tok_s", context_plot("p-tok", "Throughput vs context", "tok/s (N / T)",
                                        tok, tok_base),
                  f"tok/s per text class against context{dashed}.")]
    if step:
        fits = {k: ContextFit.from_dict(v) for k, v in doc["fits"].items()}
        base_fits = {k: ContextFit.from_dict(v) for k, v in base.get("fits", {}).items()}
        drawn = any(name in base_fits for name in step)
        out.append(figure("step_ms", fit_plot("p-step", step, fits, base_fits),
                          "Step time against mean context with this run's fit (solid)"
                          + (" and the baseline's (dashed)." if drawn else ".")))
    if commit:
        ticks = any(v == v for per in commit_base.values() for v in per.values())
        out.append(figure("avg_commit", bar_plot("p-commit", commit, commit_base),
                          "Tokens committed per verify step"
                          + ("; black ticks: the baseline." if ticks else ".")))
    return out


def _plot_data(doc: Mapping[str, Any]) -> tuple[Points, Points, Points, dict[str, dict[int, float]],
                                                 dict[str, dict[int, float]]]:
    tok: Points = {}
    tok_base: Points = {}
    step: Points = {}
    commit: dict[str, dict[int, float]] = {}
    commit_base: dict[str, dict[int, float]] = {}
    for data in doc["measurements"].values():
        name, ctx = data["case"]["text_class"], int(data["case"]["context"])
        for metric, into, x in (("tok_s", tok, ctx), ("step_ms", step, mean_context(data["case"]))):
            value = median(data, metric)
            if value is not None:
                into.setdefault(name, []).append((x, value))
        if (value := base_median(doc, data, "tok_s")) is not None:
            tok_base.setdefault(name, []).append((ctx, value))
        if (value := median(data, "avg_commit")) is not None:
            commit.setdefault(name, {})[ctx] = value
        if (value := base_median(doc, data, "avg_commit")) is not None:
            commit_base.setdefault(name, {})[ctx] = value
    return tok, tok_base, step, commit, commit_base


NOT_REPORTED = "not reported by this server"


def _drawn(values: list[float | None]) -> bool:
    return any(v is not None and v == v for v in values)


def shapes(doc: Mapping[str, Any]) -> list[Figure | str]:
    """Acceptance per draft position and along the output, per case, against the baseline
    (the record's acceptance_shapes; judge/positions.py judges them); a sentence where the
    server reports no such figure."""
    out: list[Figure | str] = []
    for i, (cid, shape) in enumerate(sorted((doc.get("acceptance_shapes") or {}).items())):
        pos, along, base_pos = shape["positions"], shape["along"], shape["base_positions"]
        if not pos:
            out.append(f"{cid}: acceptance per draft position {NOT_REPORTED}.")
        else:
            svg = shape_plot(f"s-pos{i}", f"{cid}: acceptance per draft position",
                             "draft position", "conditional acceptance rate", pos, base_pos,
                             range(1, 1 + max(len(pos), len(base_pos))), integer_x=True)
            dashed = BASELINE_DASHED if _drawn(base_pos) else ""
            out.append(figure("positions", svg, f"{cid}: rate of each draft position given the "
                              f"one before it was accepted ({shape['positions_from']}){dashed}."))
        if not along:
            out.append(f"{cid}: acceptance along the output {NOT_REPORTED}.")
            continue
        every = int(shape.get("along_tokens") or 100)
        width = max(len(along), len(shape["base_along"]))
        svg = shape_plot(f"s-along{i}", f"{cid}: avg commit along the output",
                         "output tokens", f"avg commit per {every} tokens", along,
                         shape["base_along"], [every * (j + 0.5) for j in range(width)])
        dashed = BASELINE_DASHED if _drawn(shape["base_along"]) else ""
        out.append(figure("along", svg, f"{cid}: tokens per verify step over each {every} "
                          f"output tokens ({shape['along_from']}){dashed}."))
    return out


def concurrency(rows: Sequence[Mapping[str, Any]]) -> list[Figure]:
    """tok/s per user and aggregate against concurrency C, and acceptance against C."""
    tok = {name: [(r["concurrency"], r[key]) for r in rows if r[key] is not None]
           for name, key in (("tok/s per user", "tok_s"), ("aggregate tok/s", "agg_tok_s"))}
    commit = {"avg commit": [(r["concurrency"], r["avg_commit"]) for r in rows
                             if r["avg_commit"] is not None]}
    return [figure("concurrency_tok_s", concurrency_plot(
                "p-conc-tok", "Throughput vs concurrency", "tok/s", tok),
                "tok/s per user (median request) and aggregate (all tokens / burst wall)."),
            figure("concurrency_commit", concurrency_plot(
                "p-conc-commit", "Acceptance vs concurrency", "avg commit", commit),
                "Tokens committed per verify step at each concurrency level.")]
