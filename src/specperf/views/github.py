"""The run on a GitHub Actions page: the job summary (Markdown appended to
``$GITHUB_STEP_SUMMARY``) and one workflow-command annotation per regression
(``::error``) or undetermined verdict (``::warning``), rendered from the record only.

The summary says what the terminal's first screen says (:mod:`specperf.views.screen`), in
its order: the decision, one line per root cause, the other words, what the run would have
caught; then the table of cases and where the report is (``docs/dashboards.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..core.contract import NAMES, REGRESSION, UNDETERMINED
from ..core.errors import PublishError
from ..record import readers
from . import screen

# The table's columns: the record's metric, its heading, its format.
COLUMNS = (("tok_s", "tok/s", ".1f"), ("avg_commit", "avg commit", ".2f"),
           ("step_ms", "step ms", ".1f"), ("ttft_ms", "TTFT ms", ".0f"))


def summary(doc: Mapping[str, Any], report: Path | None) -> str:
    """The job summary's Markdown for one run."""
    verdicts: Sequence[Mapping[str, Any]] = doc.get("verdicts") or []
    decided = screen.decision_line(doc).removeprefix("specperf: ")
    lines = [f"## specperf: {_cell(str((doc.get('run') or {}).get('label') or 'run'))}", "",
             f"**{_cell(decided)}**", ""]
    # The terminal's first screen, in its order (views/screen.py): the root causes, the
    # other words, what the run would have caught.
    causes = screen.cause_lines(verdicts, list(doc.get("measurements") or {}))
    lines += [f"- :x: {_cell(line)}" for line in causes]
    lines += [f"- {_cell(line)}" for line in screen.other_lines(
        doc, doc.get("not_judged") or {}, "report.html says why for each")]
    seen = screen.could_see(doc)
    if len(lines) > 4 or seen:
        lines += ([f"- {_cell(seen)}"] if seen else []) + [""]
    lines += _table(doc, verdicts)
    if report is not None:
        lines += ["", f"Report: `{report}` (results.json beside it)."]
    return "\n".join(lines) + "\n"


def _table(doc: Mapping[str, Any], verdicts: Sequence[Mapping[str, Any]]) -> list[str]:
    status = {str(v.get("case_id")): NAMES.get(str(v.get("status")), str(v.get("status")))
              for v in verdicts}
    measured: Mapping[str, Any] = doc.get("measurements") or {}
    if not measured:
        return ["No case was measured."]
    rows = ["| case | verdict | " + " | ".join(h for _, h, _ in COLUMNS) + " | Δ tok/s |",
            "|---|---|" + "---:|" * (len(COLUMNS) + 1)]
    for cid in sorted(measured):
        values = [_fmt(readers.median(measured[cid], m), f) for m, _, f in COLUMNS]
        rows.append(f"| `{cid}` | {status.get(cid, 'not judged')} | "
                    + " | ".join(values) + f" | {_change(verdicts, cid)} |")
    return rows


def _change(verdicts: Sequence[Mapping[str, Any]], cid: str) -> str:
    for v in verdicts:
        if str(v.get("case_id")) == cid:
            change = ((v.get("details") or {}).get("tok_s") or {}).get("change")
            if isinstance(change, (int, float)):
                return f"{100 * change:+.1f}%"
    return ""


def _fmt(value: float | None, spec: str) -> str:
    return "" if value is None else format(value, spec)


def _cell(text: str) -> str:
    """Text safe inside a Markdown table cell or line: no pipe ends a cell, no newline a row."""
    return text.replace("|", "\\|").replace("\n", " ")


def annotation_lines(doc: Mapping[str, Any]) -> list[str]:
    """One ``::error`` per regression and one ``::warning`` per undetermined verdict."""
    out = []
    for v in doc.get("verdicts") or []:
        level = {str(REGRESSION): "error", str(UNDETERMINED): "warning"}.get(str(v["status"]))
        if level is not None:
            word = NAMES[v["status"]]
            title = _property(f"specperf {word}: {v.get('case_id')}")
            out.append(f"::{level} title={title}::{_data(str(v.get('message', '')))}")
    return out


def _data(text: str) -> str:
    """A workflow command's message, escaped as the runner reads it back."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _property(text: str) -> str:
    """A workflow command's property value (its title): ':' and ',' end it unescaped."""
    return _data(text).replace(":", "%3A").replace(",", "%2C")


def append_summary(doc: Mapping[str, Any], path: Path, report: Path | None) -> None:
    """Append the run's summary to the job summary file GitHub gives the step."""
    try:
        with path.open("a", encoding="utf-8") as out:
            out.write(summary(doc, report))
    except OSError as exc:
        raise PublishError(f"the GitHub job summary {path} could not be appended to ({exc}); "
                           "GITHUB_STEP_SUMMARY must name a writable file") from exc
