"""The one place a verdict becomes a pytest outcome, after it is recorded.

Every judged test (a case, a context fit, the sweep, a path, a concurrency fit) ends here:
each verdict is written into the test's user properties (the record reads them there, also
from pytest-xdist workers), then the contract's words decide the outcome — a regression
fails with its sentence, an undetermined verdict skips with a one-line reason (its whole
sentence is in the record and the report), a path comparison the server could not measure
fails (never a pass), anything else passes. A test that reached no verdict at all (no
baseline entry, nothing to fit, a baseline-writing run, a path the server does not have)
records why and skips (:func:`not_judged`): the record keeps it beside the verdicts.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import NoReturn

import pytest

from ..core.contract import REGRESSION, UNDETERMINED, UNMEASURED
from ..core.limits import NOT_JUDGED_PROPERTY
from ..core.verdict import Verdict


def record(request: pytest.FixtureRequest, verdicts: Sequence[Verdict]) -> None:
    """Write ``verdicts`` where the record reads them."""
    for v in verdicts:
        request.node.user_properties.append(
            ("specperf_verdict", json.dumps(v.to_dict(), default=str)))


def conclude(request: pytest.FixtureRequest, verdicts: Sequence[Verdict], *,
             notes: Sequence[str] = (), judging: bool = True) -> None:
    """Record ``verdicts``, then fail on a regression (its sentences, then ``notes``), skip on
    an undetermined one (its first line: what would decide), else pass. ``judging`` False
    (a baseline-writing run) records and never fails."""
    record(request, verdicts)
    if not judging:
        return
    unmeasured = [v.message for v in verdicts if v.reason == UNMEASURED]
    if unmeasured:  # a figure the server did not report is never a pass
        pytest.fail("\n".join(unmeasured), pytrace=False)
    failing = [v.message for v in verdicts if v.status == REGRESSION]
    if failing:
        pytest.fail("\n".join([*failing, *notes]), pytrace=False)
    open_ = [v for v in verdicts if v.status == UNDETERMINED]
    if open_:
        pytest.skip("\n".join(f"{v.case_id} undetermined: {v.message}" for v in open_))


def not_judged(request: pytest.FixtureRequest, reason: str) -> NoReturn:
    """Record why the test reached no verdict (results.json ``not_judged``, by case), then
    skip with it: never a pass or a fail."""
    request.node.user_properties.append((NOT_JUDGED_PROPERTY, reason))
    pytest.skip(reason)
