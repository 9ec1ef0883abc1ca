"""What the gate prints: one attributed line per case, then the decision with its exit code;
over a fleet, each endpoint's block and then the fleet's line."""

from __future__ import annotations

from .decision import FleetResult, GateExit, GateResult

_LABELS = {"passed": "pass", "failed": "FAIL", "error": "ERROR", "skipped": "SKIP"}
_VERDICTS = {GateExit.PASS: "PASS", GateExit.REGRESSION: "REGRESSION",
             GateExit.USAGE: "USAGE ERROR", GateExit.INFRASTRUCTURE: "INFRASTRUCTURE PROBLEM",
             GateExit.UNDECIDED: "UNDECIDED"}
# An older record's sweep power sentence (judge/sweep/verdict.py): how far to trust a pass,
# nothing on a failure.
_POWER_SENTENCE = "Would have caught "


def summary_lines(result: GateResult, endpoint: str, simulated: bool = False) -> list[str]:
    """The attributed summary: one line per case, then the decision with its exit code
    (``simulated``: the server is a simulator, whose times are simulated time)."""
    lines = [""]
    if result.cases:
        lines.append(f"specperf gate: {len(result.cases)} smoke cases against {endpoint}")
    previous = ""
    for case in result.cases:
        message = _without_power(case.message) if case.outcome == "failed" else case.message
        first, *rest = (message or "").splitlines() or [""]
        if case.message and case.message == previous:
            first, rest = "the same as above", []  # e.g. one missing baseline, every case
        previous = case.message
        lines.append(f"  {_LABELS.get(case.outcome, case.outcome):<5} {case.case_id}"
                     + (f": {first}" if first else ""))
        lines += [f"        {line}" for line in rest]
    requests = sum(c.requests for c in result.cases)
    if requests:
        server_s = sum(c.server_s for c in result.cases)
        clock = "simulated server time" if simulated else "server time"
        lines.append(f"  cost: {requests} requests, {server_s:.0f} s of {clock}")
    lines.append(decision_line(result))
    return lines


def decision_line(result: GateResult) -> str:
    """'specperf gate: REGRESSION (exit 1): …' — the last line, the one a pipeline log shows."""
    return (f"specperf gate: {_VERDICTS[result.code]} (exit {int(result.code)}): "
            f"{result.reason}")


def _without_power(message: str) -> str:
    """A failed case without the sweep's "Would have caught …" sentence: the chance that a
    clean sweep would catch a 5% change says how far to trust a *pass*; on a regression it
    explains nothing."""
    kept = [line.partition(_POWER_SENTENCE)[0].rstrip() for line in message.splitlines()]
    return "\n".join(line for line in kept if line)


def fleet_summary_lines(result: GateResult, where: str) -> list[str]:
    """Each endpoint's gate summary, then the fleet's decision with its exit code."""
    if not isinstance(result, FleetResult):
        return summary_lines(result, where)
    lines: list[str] = []
    for name, own in result.endpoints:
        lines += summary_lines(own, f"endpoint {name}")
    lines.append(f"specperf gate: fleet ({where}): exit {int(result.code)}: {result.reason}")
    return lines
