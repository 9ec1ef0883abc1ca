"""The run page: one results document rendered as a self-contained HTML page.

Sections, top to bottom: who was measured (SIMULATED or the endpoint), the fingerprint
and how it differs from the baseline's, suite version, git revision, lock wait and run
duration; the incident-style table per text class and context; the plots; the verdicts
with their attribution; the predict-and-reconcile table; the context fits; errors; every
request's raw numbers. Every string from a server or a user goes through :func:`esc`.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..core.limits import format_percent
from ..core.model import ContextFit
from ..judge import exact
from ..record.results import baseline_metrics, mean_context, median
from ..servers.fingerprint import pinned_line
from .plots import bar_plot, concurrency_plot, context_plot, fit_plot, shape_plot

# How judge/sweep.py opens its power clause (SweepResult._power_clause).
POWER_SENTENCE = "Would have caught "

_STATUS_ORDER = {"fail": 0, "error": 1, "improved": 2, "no-baseline": 3, "pass": 4}


def esc(value: object) -> str:
    """HTML-escape anything that reaches the page (server strings included)."""
    return html.escape(str(value), quote=True)


# -- the frame ------------------------------------------------------------------------------
CSS = """
body{font:14px/1.4 system-ui,sans-serif;margin:1.5em;color:#222;max-width:1250px}
h1{font-size:1.4em;margin:0 0 .3em}h2{font-size:1.15em;margin:1.4em 0 .4em}
table{border-collapse:collapse;margin:.3em 0}th,td{border:1px solid #ccc;padding:2px 7px}
th{background:#f2f2f2;text-align:left}td.num{text-align:right;font-variant-numeric:tabular-nums}
.badge{display:inline-block;padding:2px 8px;border-radius:4px;font-weight:600}
.sim{background:#fde68a}.real{background:#bfdbfe}
.fail{background:#fecaca}.error{background:#fed7aa}.pass{background:#dcfce7}
.improved{background:#cffafe}.warn{color:#9a3412;font-weight:600}
.plots{display:flex;flex-wrap:wrap;gap:.5em}figure{margin:.3em 0;max-width:900px}
svg{max-width:100%;height:auto}.facts{width:100%}.facts th{width:11em}
details{margin:.2em 0}code,pre{font-size:12px;white-space:pre-wrap}
"""


def page(title: str, body: Iterable[str]) -> str:
    """A complete, self-contained HTML document (inline CSS; no external resource)."""
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{esc(title)}</title><style>{CSS}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "",
          row_attrs: Sequence[str] | None = None) -> str:
    """A table; ``headers`` are plain text, cells are HTML the caller escaped already."""
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    thead = f"<thead><tr>{head}</tr></thead>" if headers else ""
    out = [f'<table class="{esc(cls)}">{thead}<tbody>']
    for i, row in enumerate(rows):
        attrs = row_attrs[i] if row_attrs else ""
        out.append(f"<tr{attrs}>" + "".join(row) + "</tr>")
    return "".join(out) + "</tbody></table>"


def figure(kind: str, svg: str, caption: str) -> str:
    return (f'<figure class="plot" data-plot="{esc(kind)}">{svg}'
            f"<figcaption>{esc(caption)}</figcaption></figure>")


# -- the run page----------------------------------------------------------------------------------
def render(doc: Mapping[str, Any]) -> str:
    """The self-contained HTML page of one results document."""
    body = [_header(doc), '<h2 id="cases">Cases</h2>', _case_table(doc),
            '<h2 id="plots">Plots</h2><div class="plots">', *_plots(doc), "</div>",
            *_shapes(doc),
            '<h2 id="verdicts">Verdicts</h2>', _verdicts(doc),
            '<h2 id="reconcile">Predict and reconcile</h2>', _reconcile(doc),
            '<h2 id="fits">Context fits</h2>', _fits(doc), *concurrency_section(doc),
            *_paths(doc), _errors(doc),
            '<h2 id="samples">Samples</h2>', _samples(doc)]
    return page(f"specperf {doc['run_id']}", body)


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _pct(fraction: float | None) -> str:
    return "" if fraction is None else format_percent(fraction)


def _header(doc: Mapping[str, Any]) -> str:
    server, settings = doc["server"], doc["settings"]
    if server.get("simulated"):
        who = (f'<span class="badge sim">SIMULATED</span> profile '
               f'{esc(settings.get("sim_profile"))} at time scale {esc(server.get("time_scale"))}'
               f" ({esc(server.get('url', ''))}); figures are in simulated time")
    else:
        url = server.get("url") or settings.get("endpoint")
        who = f'<span class="badge real">{esc(url)}</span>'
    lock = ("n/a (measured on xdist workers)" if doc["lock_wait_s"] is None
            else f"{doc['lock_wait_s']:.1f} s")
    facts = [("measured", who),
             ("server", esc(f"model {server.get('model') or 'n/a'}; "
                            f"{server.get('server_name', '?')}; {server.get('flavour', '?')}"
                            f" API {server.get('api', '?')}; acceptance from "
                            f"{server.get('acceptance_source', '?')}")),
             ("fingerprint", esc(", ".join(f"{k}={v}" for k, v in
                                           sorted(doc["fingerprint"].items())) or "n/a")),
             *_baseline_rows(doc),
             ("suite", esc(f"specperf {doc['suite_version']}, git {doc['git_revision']}; "
                           f"GPU lock wait {lock}")),
             ("run", esc(f"{doc['run_id']}, ended {doc['created']}, took "
                         f"{doc['duration_s']:.1f} s; {_outcome_counts(doc)}; "
                         f"{settings.get('output_tokens')} output tokens, ignore_eos, "
                         f"non-streaming, {settings.get('repeats')}+ repeats per case"))]
    facts.insert(0, ("kind", _kind(doc)))
    facts += [("acceptance", esc(line)) for line in pinned_line(doc["fingerprint"])]
    facts += [("server note", esc(note)) for note in server.get("notes", [])]
    rows = [[f"<th>{esc(k)}</th>", f"<td>{v}</td>"] for k, v in facts]
    return (f"<h1>specperf report — {esc(doc['run_id'])}</h1>"
            + table([], rows, cls="facts") + _regressions(doc))


def _kind(doc: Mapping[str, Any]) -> str:
    """The run's kind; a partial run, an outage or a run stopped before measuring (lock
    timeout, no baseline, usage error) stands out (runkind.py)."""
    run = doc.get("run") or {}
    label = esc(run.get("label") or ("interrupted" if doc.get("interrupted") else "n/a"))
    partial = (run.get("interrupted") or run.get("outage") or run.get("stopped_by")
               or doc.get("interrupted"))
    return f'<span class="warn" data-kind="partial">{label}</span>' if partial else \
        f'<span data-kind="{esc(run.get("kind", ""))}">{label}</span>'


def _regressions(doc: Mapping[str, Any]) -> str:
    """What regressed and why, right under the header, so one screen tells the story."""
    failing = [v for v in doc["verdicts"] if v["status"] == "fail"]
    unexplained = [r for r in doc["reconcile"] if r["status"] == "fail"]
    out = []
    if failing:
        out.append(f'<h2 id="regressions" class="warn">Regressions ({len(failing)})</h2>'
                   + "".join(_regression_group(diagnosis, group)
                             for diagnosis, group in _by_diagnosis(failing).items()))
    if unexplained:
        items = [f'<li data-case="{esc(r["case_id"])}"><b>{esc(r["case_id"])}</b>: '
                 f'{esc(r["message"])}</li>' for r in unexplained]
        out.append(f'<h2 class="warn">Unexplained by the model ({len(unexplained)})</h2>'
                   '<ul class="unexplained">' + "".join(items) + "</ul>")
    return "".join(out)


def _by_diagnosis(failing: list[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Regressions grouped by what to check (the verdict's closing '— … regression: check
    …'), in first-seen order: ten cases of one cause read as one finding, not ten."""
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for verdict in failing:
        head, _, diagnosis = without_power(verdict["message"]).rpartition(" \u2014 ")
        groups.setdefault(diagnosis if head else "", []).append(verdict)
    return groups


def _regression_group(diagnosis: str, group: list[Mapping[str, Any]]) -> str:
    """One cause: its one-line summary and the cases first, then each case's figures."""
    names = ", ".join(str(v["case_id"]) for v in group)
    title = f"{diagnosis} ({len(group)}: {names})" if diagnosis else f"{len(group)}: {names}"
    items = [f'<li class="regression" data-case="{esc(v["case_id"])}"><b>'
             f'{esc(v["case_id"])}</b>: {_regression_item(v, diagnosis)}</li>' for v in group]
    return (f'<h3 class="warn">{esc(title)}</h3>'
            '<ul class="regressions">' + "".join(items) + "</ul>")


def _regression_item(verdict: Mapping[str, Any], diagnosis: str) -> str:
    """The case's figures (tok/s first), then how exact acceptance saw it, then shares."""
    text = without_power(verdict["message"])
    if diagnosis:
        text = text[: -len(diagnosis)].rstrip().removesuffix("\u2014").rstrip()
    exact_part, found, figures = text.partition(" Statistics: ")
    headline, detail = (figures, exact_part) if found else (text, "")
    more = f'<div class="detail">{esc(detail)}</div>' if detail else ""
    return f"{esc(headline)}{more}{_attribution(verdict)}"


def without_power(message: str) -> str:
    """A failing verdict without the sweep's "Would have caught …" sentence: that is how
    sensitive a *pass* was (the chance of catching a 5% change); on a failure it only
    distracts from what regressed."""
    head, found, _ = message.partition(POWER_SENTENCE)
    return head.rstrip() if found else message


def _baseline_text(base: Mapping[str, Any] | None) -> str:
    if base is None:
        return "none: nothing to compare with (create one with --update-baselines)"
    return esc(f"{base['deployment']} v{base['version']} (created {base['created']}, specperf "
               f"{base.get('suite_version', '?')}, git {base.get('git_revision', '?')})")


def _baseline_rows(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The main baseline compared with and, when concurrency levels were measured, the
    concurrency baseline; a run of the concurrency tests alone shows only the latter."""
    rows = []
    if (doc.get("run") or {}).get("kind") != "concurrency":
        rows.append(("baseline", _baseline_text(doc["baseline"]) + "; " + _fp_diff(doc)))
    if doc.get("concurrency"):
        rows.append(("concurrency baseline", _concurrency_baseline_text(doc)))
    return rows


def _concurrency_baseline_text(doc: Mapping[str, Any]) -> str:
    base = doc.get("concurrency_baseline")
    if base is None and doc["settings"].get("update_baselines"):
        return "none: this run writes one"
    if base is None:
        return "none: the levels were compared with nothing (create one with " \
            "--update-baselines -m concurrency_scaling)"
    text = esc(f"{base['deployment']} v{base['version']} ({base['path']}, created "
               f"{base['created']}; levels {', '.join(str(c) for c in base['levels'])})")
    if base.get("not_judged"):
        text += f'; <span class="warn">NOT compared: {esc(base["not_judged"])}</span>'
    diffs = base.get("fingerprint_differences") or []
    return text + ("; fingerprint same as the baseline's" if not diffs else
                   '; <span class="warn">fingerprint differs from the baseline: '
                   + esc("; ".join(diffs)) + "</span>")


def _fp_diff(doc: Mapping[str, Any]) -> str:
    if doc["baseline"] is None:
        return "n/a"
    diffs = doc["fingerprint_differences"]
    if not diffs:
        return "fingerprint same as the baseline's"
    return ('<span class="warn">fingerprint differs from the baseline: '
            + esc("; ".join(diffs)) + "</span>")


def _outcome_counts(doc: Mapping[str, Any]) -> str:
    counts: dict[str, int] = {}
    for outcome in doc["outcomes"].values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no test outcomes"


def _statuses(doc: Mapping[str, Any]) -> dict[str, str]:
    """Each case's verdict; without one, its test's outcome (e.g. skipped: no baseline)."""
    out = {node.rpartition("[")[2].rstrip("]"): outcome
           for node, outcome in doc["outcomes"].items() if node.endswith("]")}
    return {**out, **{v["case_id"]: v["status"] for v in doc["verdicts"]}}


def _base_median(doc: Mapping[str, Any], data: Mapping[str, Any], metric: str) -> float | None:
    entry = baseline_metrics(doc, data["case"]).get(metric)
    return None if entry is None else float(entry["median"])


def _delta(doc: Mapping[str, Any], data: Mapping[str, Any], metric: str) -> float | None:
    base = _base_median(doc, data, metric)
    now = median(data, metric)
    return None if base is None or now is None or base == 0 else now / base - 1.0


HEADERS = ["context", "class", "tok/s", "avg commit", "step ms", "decode tok/s", "TTFT ms",
           "n", "baseline tok/s", "Δ tok/s", "Δ avg commit", "Δ step ms", "Δ TTFT", "verdict"]


def _case_table(doc: Mapping[str, Any]) -> str:
    statuses = _statuses(doc)
    rows, attrs = [], []
    ordered = sorted(doc["measurements"].values(),
                     key=lambda d: (d["case"]["text_class"], d["case"]["context"]))
    for data in ordered:
        case, cid = data["case"], data["case"]["id"]
        status = statuses.get(cid, "—")
        n = data["summaries"].get("tok_s", {}).get("n", 0)
        cells = [str(case["context"]), esc(case["text_class"]),
                 _num(median(data, "tok_s"), ".1f"), _num(median(data, "avg_commit"), ".2f"),
                 _num(median(data, "step_ms"), ".1f"), _num(median(data, "decode_tok_s"), ".1f"),
                 _num(median(data, "ttft_ms"), ".1f"),
                 str(n), _num(_base_median(doc, data, "tok_s"), ".1f"),
                 _pct(_delta(doc, data, "tok_s")), _pct(_delta(doc, data, "avg_commit")),
                 _pct(_delta(doc, data, "step_ms")), _pct(_delta(doc, data, "ttft_ms"))]
        rows.append([f'<td class="num">{c}</td>' for c in cells[:1]] + [f"<td>{cells[1]}</td>"]
                    + [f'<td class="num">{c}</td>' for c in cells[2:]]
                    + [f'<td class="{esc(status)}">{esc(status)}</td>'])
        attrs.append(f' class="case" data-case="{esc(cid)}" data-status="{esc(status)}"')
    for cid, text in _errored_cases(doc).items():
        name, _, context = cid.partition("-ctx")
        rows.append([f'<td class="num">{esc(context)}</td>', f"<td>{esc(name)}</td>",
                     f'<td colspan="11">{esc(text[:300])}</td>', '<td class="error">error</td>'])
        attrs.append(f' class="case" data-case="{esc(cid)}" data-status="error"')
    return table(HEADERS, rows, cls="cases", row_attrs=attrs)


def _errored_cases(doc: Mapping[str, Any]) -> dict[str, str]:
    """Planned cases that errored before a measurement existed, with their error."""
    settings = doc["settings"]
    planned = {f"{name}-ctx{ctx}" for name in settings.get("text_classes", ())
               for ctx in settings.get("contexts", ())}
    out: dict[str, str] = {}
    for node, text in sorted(doc["errors"].items()):
        cid = node.rpartition("[")[2].rstrip("]")
        if "[" in node and cid in planned and cid not in doc["measurements"]:
            out.setdefault(cid, text)
    return out


def _plots(doc: Mapping[str, Any]) -> list[str]:
    tok, tok_base, step, commit, commit_base = _plot_data(doc)
    base = doc["baseline"] or {}
    out = [figure("tok_s", context_plot("p-tok", "Throughput vs context", "tok/s (N / T)",
                                        tok, tok_base),
                  "tok/s per text class against context; dashed: the baseline.")]
    if step:
        fits = {k: ContextFit.from_dict(v) for k, v in doc["fits"].items()}
        base_fits = {k: ContextFit.from_dict(v) for k, v in base.get("fits", {}).items()}
        out.append(figure("step_ms", fit_plot("p-step", step, fits, base_fits),
                          "Step time against mean context with this run's fit (solid) and "
                          "the baseline's (dashed)."))
    if commit:
        out.append(figure("avg_commit", bar_plot("p-commit", commit, commit_base),
                          "Tokens committed per verify step; black ticks: the baseline."))
    return out


NOT_REPORTED = "not reported by this server"


def _shapes(doc: Mapping[str, Any]) -> list[str]:
    """Acceptance per draft position and along the output, per case, against the baseline
    (the record's acceptance_shapes; judge/positions.py judges them)."""
    shapes = doc.get("acceptance_shapes") or {}
    if not shapes:
        return []
    out = ['<h2 id="acceptance-shape">Acceptance per draft position and along the output</h2>'
           '<div class="plots">']
    for i, (cid, shape) in enumerate(sorted(shapes.items())):
        pos, along = shape["positions"], shape["along"]
        if not pos:
            out.append(f"<p>{esc(cid)}: acceptance per draft position {NOT_REPORTED}.</p>")
        else:
            svg = shape_plot(f"s-pos{i}", f"{cid}: acceptance per draft position",
                             "draft position", "conditional acceptance rate", pos,
                             shape["base_positions"], range(1, 1 + max(
                                 len(pos), len(shape["base_positions"]))))
            out.append(figure("positions", svg, f"{cid}: rate of each draft position given the "
                              f"one before it was accepted ({shape['positions_from']}); "
                              "dashed: the baseline."))
        if not along:
            out.append(f"<p>{esc(cid)}: acceptance along the output {NOT_REPORTED}.</p>")
            continue
        every = int(shape.get("along_tokens") or 100)
        width = max(len(along), len(shape["base_along"]))
        svg = shape_plot(f"s-along{i}", f"{cid}: avg commit along the output",
                         "output tokens", f"avg commit per {every} tokens", along,
                         shape["base_along"], [every * (j + 0.5) for j in range(width)])
        out.append(figure("along", svg, f"{cid}: tokens per verify step over each {every} "
                          f"output tokens ({shape['along_from']}); dashed: the baseline."))
    return [*out, "</div>"]


Points = dict[str, list[tuple[float, float]]]


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
        if (value := _base_median(doc, data, "tok_s")) is not None:
            tok_base.setdefault(name, []).append((ctx, value))
        if (value := median(data, "avg_commit")) is not None:
            commit.setdefault(name, {})[ctx] = value
        if (value := _base_median(doc, data, "avg_commit")) is not None:
            commit_base.setdefault(name, {})[ctx] = value
    return tok, tok_base, step, commit, commit_base


def _attribution(verdict: Mapping[str, Any]) -> str:
    shares = verdict.get("attribution")
    if not shares or verdict["status"] not in ("fail", "improved"):
        return ""  # shares of a change within noise say nothing
    return (f'<div class="attribution">attribution: acceptance {_share(shares["acceptance"])}, '
            f'step time {_share(shares["step"])}, rest {_share(shares["rest"])} '
            "of the log tok/s change</div>")


def _exact(verdict: Mapping[str, Any]) -> str:
    note = exact.html(verdict)
    return f'<div class="exact">{esc(note)}</div>' if note else ""


def _share(fraction: float) -> str:
    return f"{round(100 * fraction)}%".replace("-", "\u2212")


def _verdicts(doc: Mapping[str, Any]) -> str:
    verdicts = sorted(doc["verdicts"], key=lambda v: (_STATUS_ORDER.get(v["status"], 9),
                                                      v["case_id"]))
    if not verdicts:
        return "<p>No verdicts: nothing was compared with a baseline.</p>"
    items = [f'<li class="verdict {esc(v["status"])}" data-case="{esc(v["case_id"])}">'
             f'<b>{esc(v["case_id"])}</b> — {esc(v["status"])}: {esc(v["message"])}'
             f"{_attribution(v)}{_exact(v)}</li>" for v in verdicts]
    return '<ol class="verdicts">' + "".join(items) + "</ol>"


def _reconcile(doc: Mapping[str, Any]) -> str:
    rows = [[f"<td>{esc(r['case_id'])}</td>", f'<td class="num">{r["avg_commit"]:.2f}</td>',
             f'<td class="num">{r["predicted_step_ms"]:.1f}</td>',
             f'<td class="num">{r["predicted_tok_s"]:.1f}</td>',
             f'<td class="num">{r["observed_tok_s"]:.1f}</td>',
             f'<td class="num">{_pct(r["change"])}</td>',
             f'<td class="{esc(r["status"])}">{esc(r["message"] or r["status"])}</td>']
            for r in doc["reconcile"]]
    if not rows:
        return "<p>No baseline fit to predict from.</p>"
    return ("<p>tok/s predicted from this run's avg commit and the baseline's step-time fit "
            "at the case's mean context, judged with both errors; \"explained\": this run's "
            "own step time accounts for a disagreement; a slowdown neither acceptance nor "
            "step time explains is a fail.</p>"
            + table(["case", "avg commit", "predicted step ms", "predicted tok/s",
                     "observed tok/s", "Δ", "reconciled"], rows, cls="reconcile"))


def _fits(doc: Mapping[str, Any]) -> str:
    base = (doc["baseline"] or {}).get("fits", {})
    rows = []
    for name in sorted(set(doc["fits"]) | set(base)):
        now, old = doc["fits"].get(name), base.get(name)
        slope = None if not now or not old or not old["b_ms_per_token"] else \
            now["b_ms_per_token"] / old["b_ms_per_token"] - 1.0
        rows.append([f"<td>{esc(name)}</td>", _fit_cell(now), _fit_cell(old),
                     f'<td class="num">{_pct(slope)}</td>'])
    return table(["class", "this run: step_ms = a + b·context", "baseline", "Δ slope"], rows,
                 cls="fits")


def _fit_cell(fit: Mapping[str, Any] | None) -> str:
    if not fit:
        return "<td>n/a</td>"
    se = fit.get("b_se_ms_per_token")
    error = "" if se is None else f" ± {1000 * se:.2f}"
    return (f"<td>{fit['a_ms']:.1f} ms + {1000 * fit['b_ms_per_token']:.2f}{error} ms per 1k "
            f"(residual {fit['residual_ms']:.2f} ms, {fit['n_points']} contexts)</td>")


def _errors(doc: Mapping[str, Any]) -> str:
    if not doc["errors"]:
        return ""
    items = [f"<li><b>{esc(node)}</b>: <pre>{esc(text)}</pre></li>"
             for node, text in sorted(doc["errors"].items())]
    return '<h2 id="errors">Errors</h2><ul class="errors">' + "".join(items) + "</ul>"


SAMPLE_COLUMNS = ("repeat", "warmup", "prompt_tokens", "completion_tokens", "wall_s",
                  "verify_steps", "decode_s", "ttft_s", "tok_s", "avg_commit", "step_ms",
                  "decode_tok_s", "server_accept_length", "finish_reason", "retries")


def samples_table(data: Mapping[str, Any]) -> str:
    """Every request of one case with its raw numbers (warm-ups included, marked)."""
    rows = [[f"<td>{esc(_cell(s.get(c)))}</td>" for c in SAMPLE_COLUMNS]
            for s in data["samples"]]
    return table(list(SAMPLE_COLUMNS), rows, cls="samples")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _samples(doc: Mapping[str, Any]) -> str:
    parts = [f"<details><summary>{esc(cid)}: {len(data['samples'])} requests "
             f"({esc(data['decode_method'])}, acceptance from "
             f"{esc(data['acceptance_source'])})</summary>{samples_table(data)}</details>"
             for cid, data in sorted(doc["measurements"].items())]
    return ("<p>Every request's raw numbers; results.json beside this page holds them all.</p>"
            + "".join(parts))


def _paths(doc: Mapping[str, Any]) -> list[str]:
    """Parser and streaming paths: each route of a case side by side (docs/streaming.md)."""
    runs = doc.get("paths") or []
    if not runs:
        return []
    rows = []
    for run in runs:
        for name, path in run["paths"].items():
            # The medians the path verdicts judged, as recorded (older records: n/a).
            got = path.get("figures") or {}
            text = [esc(path["measurement"]["case"]["id"]), esc(name), esc(path["route"]),
                    "yes" if path["stream"] else "no"]
            rows.append([f"<td>{t}</td>" for t in text]
                        + [f'<td class="num">{_num(got.get(key), fmt)}</td>'
                           for key, fmt in _PATH_FIGURES])
    headers = ["case", "path", "route", "stream", "tok/s", "server decode tok/s", "step ms",
               "delivered tok/s", "TTFT ms", "chunks per step"]
    return ['<h2 id="paths">Parser and streaming paths</h2>', table(headers, rows, cls="paths")]


_PATH_FIGURES = (("tok_s", ".1f"), ("decode_tok_s", ".1f"), ("step_ms", ".1f"),
                 ("delivery_tok_s", ".1f"), ("ttft_ms", ".0f"), ("chunks_per_step", ".2f"))


def concurrency_section(doc: Mapping[str, Any]) -> list[str]:
    """The record's concurrency levels: a table, tok/s per user and aggregate vs C,
    acceptance vs C, the batch fit; nothing when no level was measured."""
    section = doc.get("concurrency")
    if not section or not section.get("levels"):
        return []
    rows = section["levels"]
    cells = [[f"<td>{esc(v)}</td>" for v in (
        r["concurrency"], _num(r["tok_s"], ".1f"), _num(r["agg_tok_s"], ".1f"),
        _num(r["avg_commit"], ".2f"), _num(r["step_ms"], ".1f"),
        _num(r["server_step_ms"], ".1f"), _pct(r.get("commit_vs_c1")),
        _pct(r.get("step_vs_c1")), _num(r["gpu_s"], ".1f"))] for r in rows]
    headers = ["C", "tok/s per user", "aggregate tok/s", "avg commit", "step ms",
               "server step ms", "Δ commit vs lowest C", "Δ step vs lowest C", "GPU s"]
    tok = {name: [(r["concurrency"], r[key]) for r in rows if r[key] is not None]
           for name, key in (("tok/s per user", "tok_s"), ("aggregate tok/s", "agg_tok_s"))}
    commit = {"avg commit": [(r["concurrency"], r["avg_commit"]) for r in rows
                             if r["avg_commit"] is not None]}
    fit = section.get("fit")
    fit_text = "" if not fit else (
        f"<p>batch fit: step_ms = {fit['a_ms']:.1f} + {fit['b_ms_per_token']:.2f} ms per "
        f"request in the batch ({fit['n_points']} levels). GPU-seconds: "
        f"{section['gpu_s']:.1f} s (sum of burst walls).</p>")
    return [f'<h2 id="concurrency">Concurrency: {esc(section["case"]["id"])}</h2>',
            table(headers, cells, "concurrency"), fit_text, '<div class="plots">',
            figure("concurrency_tok_s", concurrency_plot(
                "p-conc-tok", "Throughput vs concurrency", "tok/s", tok),
                "tok/s per user (median request) and aggregate (all tokens / burst wall)."),
            figure("concurrency_commit", concurrency_plot(
                "p-conc-commit", "Acceptance vs concurrency", "avg commit", commit),
                "Tokens committed per verify step at each concurrency level."),
            "</div>"]
