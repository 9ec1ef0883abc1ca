"""The gate's decision: from pytest's exit code and each case's outcome to the gate's exit code.

====  ==============  ====================================================================
code  meaning         when
====  ==============  ====================================================================
0     pass            every smoke case was judged against its baseline and none regressed
1     regression      a case failed its baseline and none errored: block the deploy
2     usage error     a bad flag or option value (argparse, or pytest's usage error), a URL
                      that is no LLM server (the record's run.stopped_by: config-error), or a
                      same-night reference that is stale or measured on something else
3     infrastructure  any case errored (unreachable, timeout, GPU lock, unstable, corrupt
                      baseline), a case had no baseline, nothing was collected, or pytest
                      itself crashed or was interrupted: page someone, don't blame the deploy
4     undecided       every case was measured and none regressed, but the statistics could
                      not decide one (an undetermined verdict after the sweep's top-ups):
                      neither block nor pass blindly; its sentence says what would decide
                      (a same-night reference, more repeats)
====  ==============  ====================================================================

Errors beat failures: when the box or the endpoint misbehaved, a regression measured beside
it cannot be trusted either. Over a fleet each endpoint's cases are decided alone, exactly
so, and the gate exits with the worst endpoint's code, naming it. Pure values: nothing here
runs a process or prints (``runner`` runs, ``sentences`` prints).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum

from ..views.headline import FACTORS

# pytest's own exit codes (pytest.ExitCode), spelled out so the cli never imports pytest.
PYTEST_OK, PYTEST_FAILED, PYTEST_INTERRUPTED = 0, 1, 2
PYTEST_INTERNAL, PYTEST_USAGE, PYTEST_NO_TESTS = 3, 4, 5


class GateExit(IntEnum):
    """The gate's exit codes (see the module docstring)."""

    PASS = 0
    REGRESSION = 1
    USAGE = 2
    INFRASTRUCTURE = 3
    UNDECIDED = 4


@dataclass(frozen=True)
class CaseOutcome:
    """One smoke case as the run tells it: passed, failed, error or skipped."""

    case_id: str
    outcome: str
    message: str = ""
    requests: int = 0
    server_s: float = 0.0
    endpoint: str = ""  # a fleet's endpoint name (fleet.py); empty for one endpoint
    # The error is the missing (or unreadable) baseline --require-baseline checks before any
    # request: from the record's run.stopped_by, never from the message's words.
    no_baseline: bool = False
    # Skipped because its verdict was undetermined (from the record's status, never words).
    undetermined: bool = False
    # Skipped as not applicable (the test's specperf_skip property): it judges nothing that
    # exists on this server, e.g. a parser case on a server that runs no parser.
    not_applicable: bool = False
    # What it checks: "case" (a smoke case against its baseline), "sweep" (the smoke subset's
    # pooled factors) or "path" (a parser or streaming route against the native one).
    check: str = "case"
    # Its verdicts' one line (views/headline.py, from their figures), when it has verdicts.
    line: str = ""
    # The factors its regressions name (views/headline.py FACTORS keys), from the record.
    factors: tuple[str, ...] = ()


@dataclass(frozen=True)
class GateResult:
    """The gate's decision: the exit code, the sentence behind it, and each case."""

    code: GateExit
    reason: str
    cases: tuple[CaseOutcome, ...] = field(default_factory=tuple)


def decide(pytest_exit: int, cases: Sequence[CaseOutcome]) -> GateResult:
    """Map pytest's exit code and the case outcomes to the gate's exit code and reason."""
    found = tuple(cases)
    early = _from_pytest_exit(pytest_exit, found)
    if early is not None:
        return early
    errors = [c for c in found if c.outcome == "error"]
    failures = [c for c in found if c.outcome == "failed"]
    # "not applicable" skips (e.g. parser cases on a server without parsers) judge nothing
    # that exists; any other skip (no baseline) leaves the gate unable to vouch.
    skipped = [c for c in found if c.outcome == "skipped" and not c.not_applicable]
    n = len(found)
    if errors and all(c.no_baseline for c in errors):
        return GateResult(GateExit.INFRASTRUCTURE,
                          f"{len(errors)} of {n} smoke checks have no baseline to be judged "
                          "against (checked before any request): write one with the command "
                          "below, then run the gate again.", found)
    if errors:
        also = f" ({len(failures)} regression(s) beside them cannot be trusted)" if failures else ""
        return GateResult(GateExit.INFRASTRUCTURE,
                          f"{len(errors)} of {n} smoke checks could not be measured{also}: "
                          "an infrastructure problem, not the deploy's fault; page the owner "
                          "of the box.", found)
    if failures:
        moved, which = _moved(failures), _which(failures, found)
        what = f"{moved} regressed in {which}" if moved else f"{which} regressed"
        return GateResult(GateExit.REGRESSION, f"{what}: block the deploy.", found)
    if pytest_exit == PYTEST_FAILED:
        return GateResult(GateExit.INFRASTRUCTURE,
                          "pytest reported a failure the JUnit XML does not show (an error "
                          "outside the smoke cases?): see pytest's output, named below.", found)
    undecided = [c for c in skipped if c.undetermined]
    if skipped and len(undecided) == len(skipped):
        return GateResult(GateExit.UNDECIDED,
                          f"{len(undecided)} of {n} smoke checks measured but undetermined, "
                          "none regressed: the noise is wider than the tolerance (the report's "
                          "sentences say what would decide); neither a pass nor a block.",
                          found)
    if skipped:
        return GateResult(GateExit.INFRASTRUCTURE,
                          f"{len(skipped)} of {n} smoke checks were not judged (see the reasons "
                          "above): the gate cannot say the deploy is good.", found)
    apart = [c for c in found if c.outcome == "skipped" and c.not_applicable]
    if apart:  # judged nothing that exists here: never counted as within a limit
        judged = n - len(apart)
        which = f"all {judged} smoke checks judged within their" if judged != 1 else \
            "1 smoke check judged within its"
        return GateResult(GateExit.PASS, f"{which} limits ({len(apart)} not applicable to this "
                          f"server).", found)
    return GateResult(GateExit.PASS, f"all {n} smoke checks within their limits.", found)


def _moved(failures: Sequence[CaseOutcome]) -> str:
    """'step time', 'acceptance and step time': what the failures' regressions name."""
    names: list[str] = []
    for case in failures:
        for key in case.factors:
            for part in key.split("+"):
                name = FACTORS[part][0] if part in FACTORS else ""
                if name and name not in names:
                    names.append(name)
    return " and ".join(names)  # '' when the record names no factor


def _which(chosen: Sequence[CaseOutcome], found: Sequence[CaseOutcome]) -> str:
    """'2 of 3 smoke cases and the smoke subset's sweep': ``chosen`` counted by what each
    checks, each against all of its kind in ``found``."""
    parts = []
    for check, one, many in (("case", "smoke case", "smoke cases"),
                             ("path", "path check", "path checks")):
        k, n = (sum(1 for c in cases if c.check == check) for cases in (chosen, found))
        if k:
            parts.append(f"{k} of {n} {one if n == 1 else many}")
    if any(c.check == "sweep" for c in chosen):
        parts.append("the smoke subset's sweep")
    return " and ".join(parts)


def _from_pytest_exit(code: int, cases: tuple[CaseOutcome, ...]) -> GateResult | None:
    if code == PYTEST_USAGE:
        return GateResult(GateExit.USAGE, "pytest rejected the options (see its message above).")
    if code == PYTEST_NO_TESTS or (code == PYTEST_OK and not cases):
        return GateResult(GateExit.INFRASTRUCTURE,
                          "no smoke case was collected: check the perf_tests directory and -m.")
    if code in (PYTEST_OK, PYTEST_FAILED):
        return None
    what = {PYTEST_INTERRUPTED: "was interrupted or could not collect the perf tests",
            PYTEST_INTERNAL: "hit an internal error"}.get(code, f"stopped with exit code {code}")
    return GateResult(GateExit.INFRASTRUCTURE, f"pytest {what}: nothing can be concluded.",
                      cases)


# -- a fleet: each endpoint decided alone, the worst one decides the run ----------------------
# How bad each code is: an endpoint that could not be measured outranks a regression.
_SEVERITY = {GateExit.PASS: 0, GateExit.UNDECIDED: 1, GateExit.REGRESSION: 2,
             GateExit.INFRASTRUCTURE: 3, GateExit.USAGE: 4}


@dataclass(frozen=True)
class FleetResult(GateResult):
    """The fleet's decision, and each endpoint's own."""

    endpoints: tuple[tuple[str, GateResult], ...] = ()


def fleet_result(pytest_exit: int, overall: GateResult) -> GateResult:
    """Per endpoint ``decide`` on its own cases; the worst endpoint's code, naming it."""
    if pytest_exit not in (PYTEST_OK, PYTEST_FAILED) or not overall.cases:
        return overall  # usage error, crash, nothing collected: no endpoint to blame
    names = sorted({c.endpoint for c in overall.cases})  # the JUnit order is xdist's
    each = []
    for name in names:
        cases = [c for c in overall.cases if c.endpoint == name]
        bad = any(c.outcome in ("failed", "error") for c in cases)
        each.append((name, decide(PYTEST_FAILED if bad else PYTEST_OK, cases)))
    worst_name, worst = max(each, key=lambda pair: _SEVERITY[pair[1].code])
    if worst.code == GateExit.PASS:
        reason = f"every endpoint passed ({', '.join(names)})."
    else:
        reason = f"endpoint {worst_name or '(unnamed)'} decides: {worst.reason}"
    return FleetResult(worst.code, reason, overall.cases, tuple(each))
