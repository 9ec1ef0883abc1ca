"""The fleet page: one run over several endpoints as one self-contained HTML page.

Top to bottom: the run and each endpoint's status (who failed, who errored, who waited for
its GPU lock), the cross-endpoint table (the same case on each box side by side, with its
verdict), then each endpoint's own section, the single-endpoint page's content unchanged
(``page.view`` of its part of the document). The markup is views/templates/fleet.html.j2.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ..record.readers import median
from ..views import page, template
from ..views.template import Cell, Table

_STATUS_CLASS = {"pass": "pass", "fail": "fail", "error": "error", "improved": "improved"}


def render(doc: Mapping[str, Any]) -> str:
    """The self-contained HTML page of a fleet's results document."""
    parts: Sequence[Mapping[str, Any]] = doc["endpoints"]
    took = f"took {doc['duration_s']:.1f} s, ended {doc['created']}; {len(parts)} endpoints, " \
           "each measured serially by one worker under its own GPU lock (in parallel under -n)"
    endpoints = [{"name": p["name"], "url": p["url"], "deployment": p["deployment"],
                  "run": page.view(p["document"])} for p in parts]
    return template.render("fleet.html.j2", title=f"specperf fleet {doc['run_id']}", view={
        "run_id": doc["run_id"], "took": took, "overview": _overview(parts),
        "cross": _cross(parts), "endpoints": endpoints})


def _overview(parts: Sequence[Mapping[str, Any]]) -> Table:
    rows = []
    for part in parts:
        status = str(part["status"])
        wait = part.get("lock_wait_s")
        lock = "n/a" if wait is None else f"{wait:.1f} s"
        if part.get("lock_lines"):
            lock += f" — {part['lock_lines'][0]}"
        rows.append([Cell(part["name"], {"data-endpoint-status": status},
                          href=f"#endpoint-{part['name']}"),
                     Cell(part["url"]), Cell(part["deployment"]),
                     Cell(status, {"class": _STATUS_CLASS.get(status, "")}),
                     Cell(part["counts"]), Cell(lock)])
    return Table(["endpoint", "URL", "deployment", "status", "tests", "GPU lock wait"], rows,
                 "fleet")


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
    """The cross-endpoint table alone, drawn as the fleet page draws it."""
    return template.fragment("fleet_parts.html.j2", "cross", _cross(parts))


def _cross(parts: Sequence[Mapping[str, Any]]) -> Table | None:
    """Rows: cases; per endpoint: tok/s, step ms, avg commit and the case's verdict. A case
    that errored on a box is a row too, its cells saying so: never a silent gap."""
    cases = sorted({cid for p in parts for cid in p["document"]["measurements"]}
                   | {v["case_id"] for p in parts for v in p["document"]["verdicts"]
                      if "-ctx" in v["case_id"] and " " not in v["case_id"]}
                   | {cid for p in parts for cid in errored_cases(p["document"]["outcomes"])},
                   key=_case_key)
    if not cases:
        return None
    headers = ["case"] + [f"{p['name']} {m}" for p in parts
                          for m in ("tok/s", "step ms", "avg commit")]
    rows = []
    for cid in cases:
        row = [Cell(cid)]
        for part in parts:
            data = part["document"]["measurements"].get(cid)
            status = _verdict_status(part, cid)
            values = [None if data is None else median(data, m)
                      for m in ("tok_s", "step_ms", "avg_commit")]
            text = ["—" if v is None else f"{v:.1f}" if i < 2 else f"{v:.2f}"
                    for i, v in enumerate(values)]
            if data is None and status == "error":
                text = ["error"] * len(values)
            attrs = {"class": f"num {_STATUS_CLASS.get(status, '')}",
                     "data-endpoint": part["name"], "data-status": status or "none"}
            row += [Cell(t, attrs) for t in text]
        rows.append(row)
    return Table(headers, rows, "cross", [{"class": "cross-case", "data-case": cid}
                                          for cid in cases])


def _case_key(case_id: str) -> tuple[str, int]:
    name, _, ctx = case_id.rpartition("-ctx")
    return (name, int(ctx)) if ctx.isdigit() else (case_id, 0)
