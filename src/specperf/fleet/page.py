"""The fleet page: one run over several endpoints as one self-contained HTML page.

Top to bottom: the run and each endpoint's status (who failed, who errored, who waited for
its GPU lock), the cross-endpoint table (the same case on each box side by side, with its
verdict), then each endpoint's own section, the single-endpoint page's content unchanged
(``page.render`` of its part of the document).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..record.results import median
from ..views import page

_STATUS_CLASS = {"pass": "pass", "fail": "fail", "error": "error", "improved": "improved"}


def render(doc: Mapping[str, Any]) -> str:
    """The self-contained HTML page of a fleet's results document."""
    parts: Sequence[Mapping[str, Any]] = doc["endpoints"]
    body = [f"<h1>specperf fleet report — {page.esc(doc['run_id'])}</h1>",
            _overview(doc, parts), '<h2 id="cross">Same case on each endpoint</h2>',
            cross_table(parts)]
    body += [_section(part) for part in parts]
    return page.page(f"specperf fleet {doc['run_id']}", body)


def _overview(doc: Mapping[str, Any], parts: Sequence[Mapping[str, Any]]) -> str:
    rows = []
    for part in parts:
        status = str(part["status"])
        wait = part.get("lock_wait_s")
        lock = "n/a" if wait is None else f"{wait:.1f} s"
        if part.get("lock_lines"):
            lock += f" — {part['lock_lines'][0]}"
        name = page.esc(part["name"])
        rows.append([f'<td data-endpoint-status="{page.esc(status)}">'
                     f'<a href="#endpoint-{name}">{name}</a></td>',
                     f"<td>{page.esc(part['url'])}</td>",
                     f"<td>{page.esc(part['deployment'])}</td>",
                     f'<td class="{_STATUS_CLASS.get(status, "")}">{page.esc(status)}</td>',
                     f"<td>{page.esc(part['counts'])}</td>", f"<td>{page.esc(lock)}</td>"])
    took = f"took {doc['duration_s']:.1f} s, ended {doc['created']}; {len(parts)} endpoints, " \
           "each measured serially by one worker under its own GPU lock (in parallel under -n)"
    return (f"<p>{page.esc(took)}</p>"
            + page.table(["endpoint", "URL", "deployment", "status", "tests", "GPU lock wait"],
                         rows, cls="fleet"))


_CASE_IN_ID = re.compile(r"(?:^|[\[-])([A-Za-z0-9_]+-ctx\d+)\]$")


def errored_cases(outcomes: Mapping[str, str]) -> set[str]:
    """The case ids (class-ctxN) of the perf tests that errored, from their node ids
    (``test_context_scaling[reasoning-ctx13]``; in a fleet ``[box-reasoning-ctx13]``)."""
    return {m.group(1) for nodeid, outcome in outcomes.items()
            if outcome == "error" and (m := _CASE_IN_ID.search(nodeid))}


def _verdict_status(part: Mapping[str, Any], case_id: str) -> str:
    sub = part["document"]
    for verdict in sub["verdicts"]:
        if verdict["case_id"] == case_id:
            return str(verdict["status"])
    return "error" if case_id in errored_cases(sub["outcomes"]) else ""


def cross_table(parts: Sequence[Mapping[str, Any]]) -> str:
    """Rows: cases; per endpoint: tok/s, step ms, avg commit and the case's verdict. A case
    that errored on a box is a row too, its cells saying so: never a silent gap."""
    cases = sorted({cid for p in parts for cid in p["document"]["measurements"]}
                   | {v["case_id"] for p in parts for v in p["document"]["verdicts"]
                      if "-ctx" in v["case_id"] and " " not in v["case_id"]}
                   | {cid for p in parts for cid in errored_cases(p["document"]["outcomes"])},
                   key=_case_key)
    headers = ["case"] + [f"{p['name']} {m}" for p in parts
                          for m in ("tok/s", "step ms", "avg commit")]
    rows = []
    for cid in cases:
        row = [f"<td>{page.esc(cid)}</td>"]
        for part in parts:
            data = part["document"]["measurements"].get(cid)
            status = _verdict_status(part, cid)
            cls = _STATUS_CLASS.get(status, "")
            values = [None if data is None else median(data, m)
                      for m in ("tok_s", "step_ms", "avg_commit")]
            text = ["—" if v is None else f"{v:.1f}" if i < 2 else f"{v:.2f}"
                    for i, v in enumerate(values)]
            if data is None and status == "error":
                text = ["error"] * len(values)
            cell_attrs = (f' data-endpoint="{page.esc(part["name"])}" '
                          f'data-status="{page.esc(status or "none")}"')
            row += [f'<td class="num {cls}"{cell_attrs}>{page.esc(t)}</td>' for t in text]
        rows.append(row)
    if not rows:
        return "<p>No endpoint measured a case.</p>"
    attrs = [f' class="cross-case" data-case="{page.esc(cid)}"' for cid in cases]
    return page.table(headers, rows, cls="cross", row_attrs=attrs)


def _case_key(case_id: str) -> tuple[str, int]:
    name, _, ctx = case_id.rpartition("-ctx")
    return (name, int(ctx)) if ctx.isdigit() else (case_id, 0)


def _section(part: Mapping[str, Any]) -> str:
    inner = page.render(part["document"])
    body = inner.split("<body>\n", 1)[-1].rsplit("\n</body>", 1)[0]
    return (f'<section id="endpoint-{page.esc(part["name"])}" class="endpoint">'
            f"<h2>Endpoint {page.esc(part['name'])} — {page.esc(part['url'])} "
            f"(deployment {page.esc(part['deployment'])})</h2>{body}</section>")
