"""The deploy gate over a fleet: each endpoint decided alone, the worst one decides the run.

``specperf gate --endpoints FILE`` runs the smoke subset on every endpoint of the file (in
one pytest run, in parallel under ``-- -n N``). Each endpoint's cases are judged by
:func:`specperf.gate.decide` exactly as a one-endpoint gate would judge them; the run exits
with the worst code (infrastructure 3 beats regression 1 beats pass 0) and its reason names
the endpoint, so the page goes to the right box.
"""

from __future__ import annotations

from dataclasses import dataclass

from .gate import GateExit, GateResult, decide, summary_lines

# How bad each code is: an endpoint that could not be measured outranks a regression.
_SEVERITY = {GateExit.PASS: 0, GateExit.REGRESSION: 1, GateExit.INFRASTRUCTURE: 2,
             GateExit.USAGE: 3}
_PYTEST_OK, _PYTEST_FAILED = 0, 1


@dataclass(frozen=True)
class FleetResult(GateResult):
    """The fleet's decision, and each endpoint's own."""

    endpoints: tuple[tuple[str, GateResult], ...] = ()


def fleet_result(pytest_exit: int, overall: GateResult) -> GateResult:
    """Per endpoint ``decide`` on its own cases; the worst endpoint's code, naming it."""
    if pytest_exit not in (_PYTEST_OK, _PYTEST_FAILED) or not overall.cases:
        return overall  # usage error, crash, nothing collected: no endpoint to blame
    names = list(dict.fromkeys(c.endpoint for c in overall.cases))
    each = []
    for name in names:
        cases = [c for c in overall.cases if c.endpoint == name]
        bad = any(c.outcome in ("failed", "error") for c in cases)
        each.append((name, decide(_PYTEST_FAILED if bad else _PYTEST_OK, cases)))
    worst_name, worst = max(each, key=lambda pair: _SEVERITY[pair[1].code])
    if worst.code == GateExit.PASS:
        reason = f"every endpoint passed ({', '.join(names)})."
    else:
        reason = f"endpoint {worst_name or '(unnamed)'} decides: {worst.reason}"
    return FleetResult(worst.code, reason, overall.cases, tuple(each))


def fleet_summary_lines(result: GateResult, where: str) -> list[str]:
    """Each endpoint's gate summary, then the fleet's decision with its exit code."""
    if not isinstance(result, FleetResult):
        return summary_lines(result, where)
    lines: list[str] = []
    for name, own in result.endpoints:
        lines += summary_lines(own, f"endpoint {name}")
    lines.append(f"specperf gate: fleet ({where}): exit {int(result.code)}: {result.reason}")
    return lines
