"""What the gate prints: the decision with its exit code, the root causes, a line per check
that did not pass, the cost and where the detail is; over a fleet, each endpoint's block and
then the fleet's line."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..views.screen import cause_lines, wrap
from .decision import CaseOutcome, FleetResult, GateExit, GateResult

_LABELS = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}
_VERDICTS = {GateExit.PASS: "PASS", GateExit.REGRESSION: "REGRESSION",
             GateExit.USAGE: "USAGE ERROR", GateExit.INFRASTRUCTURE: "INFRASTRUCTURE PROBLEM",
             GateExit.UNDECIDED: "UNDECIDED"}


def summary_lines(result: GateResult, endpoint: str, simulated: bool = False,
                  reference_cost: tuple[int, float] | None = None,
                  record: Mapping[str, Any] | None = None,
                  where: Sequence[str] = (), decode: str | None = None) -> list[str]:
    """The gate's closing block, its answer said once: the decision with its exit code, one
    line per root cause (from the run's ``record``), one line per check that did not pass,
    the cost, what the cases' decode lengths can and cannot see (``decode``), then ``where``
    (the report, pytest's output). ``simulated``: the server is a simulator, whose times are
    simulated time; ``reference_cost``: a same-night reference's requests and server seconds,
    which the cost line counts beside this run's."""
    lines = ["", decision_line(result)]
    causes = _causes(record) if result.code == GateExit.REGRESSION else []
    lines += [wrap(f"  {line}") for line in causes]
    if result.cases:
        lines.append(f"  {_checks(result.cases)} against {endpoint}")
    previous = ""
    # Beside a root cause, the checks that could not decide are one line: their figures are
    # the cause's (a 15 % step rise leaves each case's own interval across its 10 % limit).
    open_ = [c.case_id for c in result.cases if c.undetermined] if causes else []
    if open_:
        lines.append(wrap(f"  OPEN  {len(open_)} check{'s' if len(open_) != 1 else ''} "
                          f"({', '.join(open_)}): each interval reaches across its limit, so "
                          f"none is a pass or a fail on its own; report.html says why for each."))
    for case in result.cases:
        if case.outcome == "passed" or (case.outcome == "failed" and causes) or \
                case.case_id in open_:
            continue  # a pass says nothing more; a regression is in its root cause's line
        # A judged check's one line from its verdicts' figures (its sentences are in
        # report.html); an error's own first line and the rest below it.
        message = case.message
        first, *rest = [case.line] if case.line else (message or "").splitlines() or [""]
        if case.message and case.message == previous:
            first, rest = "the same as above", []  # e.g. one missing baseline, every case
        previous = case.message
        head = f"  {_label(case):<5} {case.case_id}" + (f": {first}" if first else "")
        lines.append(wrap(head) if case.line else head)  # a judged check's figures wrap
        lines += [f"        {line}" for line in rest]
    requests = sum(c.requests for c in result.cases)
    if requests:
        server_s = sum(c.server_s for c in result.cases)
        clock = "simulated server time" if simulated else "server time"
        cost = f"{requests} requests, {server_s:.0f} s"
        if reference_cost is not None and reference_cost[0]:
            total = server_s + reference_cost[1]
            cost = (f"reference {reference_cost[0]} requests, {reference_cost[1]:.0f} s; "
                    f"candidate {cost}; both phases {total:.0f} s")
        lines.append(f"  cost: {cost} of {clock}")
    if decode:
        lines.append(wrap(f"  decode: {decode}"))
    # The decision line never wraps (a pipeline greps it), nor an error's sentence or a path
    # (copied whole); figures do.
    return lines + [f"  {line}" for line in where]


def _causes(record: Mapping[str, Any] | None) -> list[str]:
    """The record's root causes (views/screen.py: one line per factor that regressed)."""
    if not record:
        return []
    verdicts = list(record.get("verdicts") or [])
    return cause_lines(verdicts, list(record.get("measurements") or {}))


def _label(case: CaseOutcome) -> str:
    return "OPEN" if case.undetermined else _LABELS.get(case.outcome, case.outcome)


def _checks(cases: Sequence[CaseOutcome]) -> str:
    """'5 smoke checks (3 cases, 1 path, the sweep)'."""
    kinds = [(sum(1 for c in cases if c.check == check), name)
             for check, name in (("case", "case"), ("path", "path"))]
    parts = [f"{k} {name}{'s' if k != 1 else ''}" for k, name in kinds if k]
    if any(c.check == "sweep" for c in cases):
        parts.append("the sweep")
    return f"{len(cases)} smoke check{'s' if len(cases) != 1 else ''} ({', '.join(parts)})"


def decision_line(result: GateResult) -> str:
    """'specperf gate: REGRESSION (exit 1): …' — the closing block's first line."""
    return (f"specperf gate: {_VERDICTS[result.code]} (exit {int(result.code)}): "
            f"{result.reason}")


def fleet_summary_lines(result: GateResult, where: str) -> list[str]:
    """Each endpoint's gate summary, then the fleet's decision with its exit code."""
    if not isinstance(result, FleetResult):
        return summary_lines(result, where)
    lines: list[str] = []
    for name, own in result.endpoints:
        lines += summary_lines(own, f"endpoint {name}")
    lines.append(f"specperf gate: fleet ({where}): exit {int(result.code)}: {result.reason}")
    return lines
