"""The run page: one results document rendered as a self-contained HTML page.

Sections, top to bottom: the decision (PASS, FAIL or UNDETERMINED, the sweep's decision,
which factor moved: views/decision.py) and what the run could have seen; the regressions
grouped by the factor they name; every verdict; who was measured (SIMULATED or the
endpoint), the fingerprint and how it differs from the baseline's, suite version, git
revision, lock wait and run duration; the incident-style table per text class and context;
the plots; the predict-and-reconcile table; the context fits; errors; every request's raw
numbers. This module builds each section's data from the document; the
markup is templates/run.html.j2, autoescaped (views/template.py), so no string from a
server or a user reaches the page unescaped.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core.contract import IMPROVED, NAMES, PRIORITY, REGRESSION
from ..core.fingerprint import pinned_line
from ..core.limits import format_percent
from ..record.readers import median
from . import decision, figures, screen, template
from .figures import base_median
from .headline import FACTORS, factor, headline
from .template import Cell, Span, Table, num

TEMPLATE = "run.html.j2"
SECTIONS_TEMPLATE = "run_parts.html.j2"

# The contract's order (core/contract.py PRIORITY), an error (pytest's outcome, no status)
# right after a regression: what needs a look first.
_STATUS_ORDER = {word: rank for rank, word in enumerate((PRIORITY[0], "error", *PRIORITY[1:]))}
# How the verdict list names a status (results.json stores a regression as "fail").
_WORDS = {REGRESSION: NAMES[REGRESSION], "error": "error"}


def render(doc: Mapping[str, Any]) -> str:
    """The self-contained HTML page of one results document."""
    return template.render(TEMPLATE, title=f"specperf {doc['run_id']}", view=view(doc))


def view(doc: Mapping[str, Any]) -> dict[str, Any]:
    """Every section's data, by the name of the macro that draws it."""
    return {name: build(doc) for name, build in SECTIONS.items()}


def section(name: str, doc: Mapping[str, Any]) -> str:
    """One section of the run page alone, drawn as the page draws it."""
    return template.fragment(SECTIONS_TEMPLATE, name, SECTIONS[name](doc))


def _num(value: float | None, fmt: str) -> str:
    return "n/a" if value is None else format(value, fmt)


def _pct(fraction: float | None) -> str:
    return "" if fraction is None else format_percent(fraction)


# -- the header ---------------------------------------------------------------------------------
def _header(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {"run_id": doc["run_id"], "decision": _decision(doc), "facts": _facts(doc),
            "regressions": _regressions(doc), "measured": _measured(doc)}


def _decision(doc: Mapping[str, Any]) -> dict[str, Any]:
    """The page's first screen, the terminal's in the same order (views/screen.py): the
    decision, its root causes, the other words, what the run could have seen."""
    found = decision.decide(doc)
    line = screen.decision_line(doc).removeprefix("specperf: ")
    verdicts = list(doc.get("verdicts") or [])
    return {"word": found.word, "text": line[len(found.word):], "cls": found.word.lower(),
            "causes": screen.cause_lines(verdicts, list(doc.get("measurements") or {})),
            "others": screen.other_lines(doc, doc.get("not_judged") or {},
                                         "the verdicts below say why"),
            "resolution": screen.could_see(doc),
            "detail": found.line()}


def _measured(doc: Mapping[str, Any]) -> Span:
    """SIMULATED or the endpoint, beside the title."""
    server = doc["server"]
    if server.get("simulated"):
        return Span("SIMULATED", "badge sim")
    return Span(server.get("url") or doc["settings"].get("endpoint"), "badge real")


def _facts(doc: Mapping[str, Any]) -> list[tuple[str, list[Span]]]:
    server, settings = doc["server"], doc["settings"]
    if server.get("simulated"):
        who = [Span("SIMULATED", "badge sim"),
               Span(f" profile {settings.get('sim_profile')} at time scale "
                    f"{server.get('time_scale')} ({server.get('url', '')}); figures are in "
                    "simulated time")]
    else:
        who = [Span(server.get("url") or settings.get("endpoint"), "badge real")]
    lock = ("n/a (measured on xdist workers)" if doc["lock_wait_s"] is None
            else f"{doc['lock_wait_s']:.1f} s")
    facts = [("kind", [_kind(doc)]), ("measured", who),
             ("server", [Span(f"model {server.get('model') or 'n/a'}; "
                              f"{server.get('server_name', '?')}; {server.get('flavour', '?')}"
                              f" API {server.get('api', '?')}; acceptance from "
                              f"{server.get('acceptance_source', '?')}")]),
             ("fingerprint", [Span(", ".join(f"{k}={v}" for k, v in
                                             sorted(doc["fingerprint"].items())) or "n/a")]),
             *_baseline_rows(doc),
             ("suite", [Span(f"specperf {doc['suite_version']}, git {doc['git_revision']}; "
                             f"GPU lock wait {lock}")]),
             ("run", [Span(f"{doc['run_id']}, ended {doc['created']}, took "
                           f"{doc['duration_s']:.1f} s; {_outcome_counts(doc)}; "
                           f"{settings.get('output_tokens')} output tokens, ignore_eos, "
                           f"non-streaming, {settings.get('repeats')}+ repeats per case")])]
    facts += [("acceptance", [Span(line)]) for line in pinned_line(doc["fingerprint"])]
    return facts + [("server note", [Span(note)]) for note in server.get("notes", [])]


def _kind(doc: Mapping[str, Any]) -> Span:
    """The run's kind; a partial run, an outage or a run stopped before measuring (lock
    timeout, no baseline, usage error) stands out (runkind.py)."""
    run = doc.get("run") or {}
    label = run.get("label") or ("interrupted" if doc.get("interrupted") else "n/a")
    partial = (run.get("interrupted") or run.get("outage") or run.get("stopped_by")
               or doc.get("interrupted"))
    return Span(label, "warn", "partial") if partial else Span(label, "", run.get("kind", ""))


def _baseline_rows(doc: Mapping[str, Any]) -> list[tuple[str, list[Span]]]:
    """The main baseline compared with and, when concurrency levels were measured, the
    concurrency baseline; a run of the concurrency tests alone shows only the latter."""
    rows = []
    if (doc.get("run") or {}).get("kind") != "concurrency":
        rows.append(("baseline", [Span(_baseline_text(doc["baseline"]) + "; "),
                                  _fp_diff(doc["baseline"], doc["fingerprint_differences"])]))
    if doc.get("concurrency"):
        rows.append(("concurrency baseline", _concurrency_baseline(doc)))
    return rows


def _baseline_text(base: Mapping[str, Any] | None) -> str:
    if base is None:
        return "none: nothing to compare with (create one with --specperf-update-baselines)"
    reason = base.get("reason") or {}
    why = f"; {reason['text']}" if reason.get("kind") not in (None, "unrecorded") else ""
    return (f"{base['deployment']} v{base['version']} (created {base['created']}, specperf "
            f"{base.get('suite_version', '?')}, git {base.get('git_revision', '?')}{why})")


def _fp_diff(base: Mapping[str, Any] | None, diffs: list[str] | None) -> Span:
    if base is None:
        return Span("n/a")
    if not diffs:
        return Span("fingerprint same as the baseline's")
    return Span("fingerprint differs from the baseline: " + "; ".join(diffs), "warn")


def _concurrency_baseline(doc: Mapping[str, Any]) -> list[Span]:
    base = doc.get("concurrency_baseline")
    if base is None and doc["settings"].get("update_baselines"):
        return [Span("none: this run writes one")]
    if base is None:
        return [Span("none: the levels were compared with nothing (create one with "
                     "--specperf-update-baselines -m concurrency_scaling)")]
    out = [Span(f"{base['deployment']} v{base['version']} ({base['path']}, created "
                f"{base['created']}; levels {', '.join(str(c) for c in base['levels'])})")]
    if base.get("not_judged"):
        out += [Span("; "), Span(f"NOT compared: {base['not_judged']}", "warn")]
    return [*out, Span("; "), _fp_diff(base, base.get("fingerprint_differences"))]


def _outcome_counts(doc: Mapping[str, Any]) -> str:
    counts: dict[str, int] = {}
    for outcome in doc["outcomes"].values():
        counts[outcome] = counts.get(outcome, 0) + 1
    return ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no test outcomes"


# -- regressions, right under the decision -----------------------------------------------------
def _regressions(doc: Mapping[str, Any]) -> dict[str, Any]:
    """What regressed and why, grouped by the factor each verdict names (its fields, not its
    sentence: views/headline.py), and the slowdowns the model cannot explain."""
    failing = [v for v in doc["verdicts"] if v["status"] == REGRESSION]
    unexplained = [{"case": r["case_id"], "message": r["message"]}
                   for r in doc["reconcile"] if r["status"] == REGRESSION]
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for verdict in failing:  # in first-seen order: ten cases of one cause are one finding
        groups.setdefault(factor(verdict), []).append(verdict)
    return {"count": len(failing), "unexplained": unexplained,
            "groups": [_regression_group(name, group) for name, group in groups.items()]}


def _regression_group(name: str, group: list[Mapping[str, Any]]) -> dict[str, Any]:
    """One cause: what to check and the cases first, then each case's figures."""
    names = ", ".join(str(v["case_id"]) for v in group)
    hint = FACTORS[name][2] if name in FACTORS else \
        "other regressions (their records name no factor: each line says what its sentence names)"
    return {"title": f"{hint} ({len(group)}: {names})", "factor": name or "unnamed",
            "items": [{"case": v["case_id"], "headline": _without_factor(v),
                       "attribution": _attribution(v)} for v in group]}


def _without_factor(verdict: Mapping[str, Any]) -> str:
    """The verdict's headline without the factor its group's title already names."""
    line = headline(verdict)
    name = factor(verdict)
    tail = f" \u2014 {FACTORS[name][1]}" if name in FACTORS else ""
    return line.removesuffix(tail) if tail else line


def _attribution(verdict: Mapping[str, Any]) -> str:
    shares = verdict.get("attribution")
    if not shares or verdict["status"] not in (REGRESSION, IMPROVED):
        return ""  # shares of a change within noise say nothing
    return (f"attribution: acceptance {_share(shares['acceptance'])}, step time "
            f"{_share(shares['step'])}, rest {_share(shares['rest'])} of the log tok/s change")


def _share(fraction: float) -> str:
    return f"{round(100 * fraction)}%".replace("-", "\u2212")


# -- the case table ------------------------------------------------------------------------------
HEADERS = ["context", "class", "tok/s", "avg commit", "step ms", "decode tok/s", "TTFT ms",
           "n", "baseline tok/s", "Δ tok/s", "Δ avg commit", "Δ step ms", "Δ TTFT", "verdict"]


def _statuses(doc: Mapping[str, Any]) -> dict[str, str]:
    """Each case's verdict; without one, its test's outcome (e.g. skipped: no baseline)."""
    out = {node.rpartition("[")[2].rstrip("]"): outcome
           for node, outcome in doc["outcomes"].items() if node.endswith("]")}
    return {**out, **{v["case_id"]: v["status"] for v in doc["verdicts"]}}


def _delta(doc: Mapping[str, Any], data: Mapping[str, Any], metric: str) -> float | None:
    base = base_median(doc, data, metric)
    now = median(data, metric)
    return None if base is None or now is None or base == 0 else now / base - 1.0


def _cases(doc: Mapping[str, Any]) -> Table:
    statuses = _statuses(doc)
    rows, attrs = [], []
    ordered = sorted(doc["measurements"].values(),
                     key=lambda d: (d["case"]["text_class"], d["case"]["context"]))
    for data in ordered:
        case, cid = data["case"], data["case"]["id"]
        status = statuses.get(cid, "—")
        values = [_num(median(data, "tok_s"), ".1f"), _num(median(data, "avg_commit"), ".2f"),
                  _num(median(data, "step_ms"), ".1f"),
                  _num(median(data, "decode_tok_s"), ".1f"), _num(median(data, "ttft_ms"), ".1f"),
                  str(data["summaries"].get("tok_s", {}).get("n", 0)),
                  _num(base_median(doc, data, "tok_s"), ".1f"),
                  *(_pct(_delta(doc, data, m)) for m in ("tok_s", "avg_commit", "step_ms",
                                                         "ttft_ms"))]
        rows.append([num(case["context"]), Cell(case["text_class"]), *map(num, values),
                     Cell(_WORDS.get(status, status), {"class": status})])
        attrs.append({"class": "case", "data-case": cid, "data-status": status})
    for cid, text in _errored_cases(doc).items():
        name, _, context = cid.partition("-ctx")
        rows.append([num(context), Cell(name), Cell(text[:300], {"colspan": 11}),
                     Cell("error", {"class": "error"})])
        attrs.append({"class": "case", "data-case": cid, "data-status": "error"})
    return Table(HEADERS, rows, "cases", attrs)


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


# -- verdicts, reconcile, fits -------------------------------------------------------------------
def _verdicts(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    verdicts = sorted(doc["verdicts"], key=lambda v: (_STATUS_ORDER.get(v["status"], 9),
                                                      v["case_id"]))
    return [{"status": v["status"], "word": _WORDS.get(v["status"], v["status"]),
             "case": v["case_id"],
             "message": v["message"],
             "attribution": _attribution(v), "exact": _exact_note(v)} for v in verdicts]


def _exact_note(verdict: Mapping[str, Any]) -> str:
    """How exact acceptance saw a case (judge/exact.py), unless a change already leads the
    verdict's message."""
    found = verdict.get("exact")
    if not found or found.get("status") == "changed":
        return ""
    return str(found.get("message", ""))


def _reconcile(doc: Mapping[str, Any]) -> Table | None:
    rows = [[Cell(r["case_id"]), num(f"{r['avg_commit']:.2f}"),
             num(f"{r['predicted_step_ms']:.1f}"), num(f"{r['predicted_tok_s']:.1f}"),
             num(f"{r['observed_tok_s']:.1f}"), num(_pct(r["change"])),
             Cell(r["message"] or r["status"], {"class": r["status"]})]
            for r in doc["reconcile"]]
    if not rows:
        return None
    return Table(["case", "avg commit", "predicted step ms", "predicted tok/s",
                  "observed tok/s", "Δ", "reconciled"], rows, "reconcile")


def _fits(doc: Mapping[str, Any]) -> Table:
    base = (doc["baseline"] or {}).get("fits", {})
    rows = []
    for name in sorted(set(doc["fits"]) | set(base)):
        now, old = doc["fits"].get(name), base.get(name)
        slope = None if not now or not old or not old["b_ms_per_token"] else \
            now["b_ms_per_token"] / old["b_ms_per_token"] - 1.0
        rows.append([Cell(name), Cell(_fit_text(now)), Cell(_fit_text(old)), num(_pct(slope))])
    return Table(["class", "this run: step_ms = a + b·context", "baseline", "Δ slope"], rows,
                 "fits")


def _fit_text(fit: Mapping[str, Any] | None) -> str:
    if not fit:
        return "n/a"
    se = fit.get("b_se_ms_per_token")
    error = "" if se is None else f" ± {1000 * se:.2f}"
    return (f"{fit['a_ms']:.1f} ms + {1000 * fit['b_ms_per_token']:.2f}{error} ms per 1k "
            f"(residual {fit['residual_ms']:.2f} ms, {fit['n_points']} contexts)")


# -- concurrency, paths, errors, samples ---------------------------------------------------------
def _concurrency(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """The record's concurrency levels: a table, tok/s per user and aggregate vs C,
    acceptance vs C, the batch fit; nothing when no level was measured."""
    found = doc.get("concurrency")
    if not found or not found.get("levels"):
        return None
    rows = found["levels"]
    cells = [[Cell(v) for v in (
        r["concurrency"], _num(r["tok_s"], ".1f"), _num(r["agg_tok_s"], ".1f"),
        _num(r["avg_commit"], ".2f"), _num(r["step_ms"], ".1f"),
        _num(r["server_step_ms"], ".1f"), _pct(r.get("commit_vs_c1")),
        _pct(r.get("step_vs_c1")), _num(r["gpu_s"], ".1f"))] for r in rows]
    headers = ["C", "tok/s per user", "aggregate tok/s", "avg commit", "step ms",
               "server step ms", "Δ commit vs lowest C", "Δ step vs lowest C", "GPU s"]
    fit = found.get("fit")
    fit_text = "" if not fit else (
        f"batch fit: step_ms = {fit['a_ms']:.1f} + {fit['b_ms_per_token']:.2f} ms per "
        f"request in the batch ({fit['n_points']} levels). GPU-seconds: "
        f"{found['gpu_s']:.1f} s (sum of burst walls).")
    return {"case": found["case"]["id"], "table": Table(headers, cells, "concurrency"),
            "fit": fit_text, "figures": figures.concurrency(rows)}


_PATH_FIGURES = (("tok_s", ".1f"), ("decode_tok_s", ".1f"), ("step_ms", ".1f"),
                 ("delivery_tok_s", ".1f"), ("ttft_ms", ".0f"), ("chunks_per_step", ".2f"))


def _paths(doc: Mapping[str, Any]) -> Table | None:
    """Parser and streaming paths: each route of a case side by side (docs/streaming.md)."""
    rows = []
    for run in doc.get("paths") or []:
        for name, path in run["paths"].items():
            # The medians the path verdicts judged, as recorded (older records: n/a).
            got = path.get("figures") or {}
            rows.append([Cell(path["measurement"]["case"]["id"]), Cell(name),
                         Cell(path["route"]), Cell("yes" if path["stream"] else "no"),
                         *(num(_num(got.get(key), fmt)) for key, fmt in _PATH_FIGURES)])
    if not rows:
        return None
    return Table(["case", "path", "route", "stream", "tok/s", "server decode tok/s", "step ms",
                  "delivered tok/s", "TTFT ms", "chunks per step"], rows, "paths")


def _errors(doc: Mapping[str, Any]) -> list[tuple[str, str]]:
    return sorted(doc["errors"].items())


SAMPLE_COLUMNS = ("repeat", "warmup", "prompt_tokens", "completion_tokens", "wall_s",
                  "verify_steps", "decode_s", "ttft_s", "tok_s", "avg_commit", "step_ms",
                  "decode_tok_s", "server_accept_length", "finish_reason", "retries")


def samples_table(data: Mapping[str, Any]) -> Table:
    """Every request of one case with its raw numbers (warm-ups included, marked)."""
    rows = [[Cell(_cell(s.get(c))) for c in SAMPLE_COLUMNS] for s in data["samples"]]
    return Table(list(SAMPLE_COLUMNS), rows, "samples")


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "" if value is None else str(value)


def _samples(doc: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [{"summary": f"{cid}: {len(data['samples'])} requests ({data['decode_method']}, "
                        f"acceptance from {data['acceptance_source']})",
             "table": samples_table(data)} for cid, data in sorted(doc["measurements"].items())]


# The page's sections, each drawn by the macro of the same name in run.html.j2.
SECTIONS: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "header": _header, "kind": _kind, "regressions": _regressions, "cases": _cases,
    "plots": figures.context, "shapes": figures.shapes, "verdicts": _verdicts,
    "reconcile": _reconcile, "fits": _fits, "concurrency": _concurrency, "paths": _paths,
    "errors": _errors, "samples": _samples}
