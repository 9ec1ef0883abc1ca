"""The verdict contract's one rule (core/contract.py): its truth table, every scope."""

from __future__ import annotations

import pytest

from specperf.core.contract import (
    IMPROVED,
    NOTED,
    PASS,
    REGRESSION,
    UNDETERMINED,
    Change,
    status,
)

TOL = 0.10


@pytest.mark.parametrize(("change", "direction", "want"), [
    # An interval (a slope's, a sweep factor's): the tolerance decides, the interval says if sure.
    (Change(-0.15, -0.18, -0.12), +1, REGRESSION),  # fell beyond −10 %, surely
    (Change(+0.15, +0.12, +0.18), -1, REGRESSION),  # step time rose beyond +10 %, surely
    (Change(+0.15, +0.12, +0.18), +1, IMPROVED),
    (Change(-0.05, -0.07, -0.03), +1, NOTED),  # surely moved, inside the tolerance
    (Change(+0.01, -0.02, +0.04), +1, PASS),  # no sure change
    (Change(-0.09, -0.13, -0.05), +1, UNDETERMINED),  # straddles the limit
    (Change(+0.09, +0.05, +0.13), +1, NOTED),  # may be an improvement: never a skip
    # A point estimate (a case's medians): position alone, never noted.
    (Change(-0.11), +1, REGRESSION), (Change(+0.11), +1, IMPROVED), (Change(-0.05), +1, PASS),
    # Known exactly (exact acceptance): any change is sure.
    (Change.exact(-0.02), +1, NOTED), (Change.exact(0.0), +1, PASS),
    (Change.exact(-0.12), +1, REGRESSION), (Change.exact(+0.12), +1, IMPROVED),
])
def test_the_contract_truth_table(change, direction, want):
    assert status(change, direction, TOL) == want


def test_a_sequential_decision_decides_beyond_the_tolerance_the_interval_the_rest():
    straddling = Change(-0.09, -0.13, -0.05)
    assert status(straddling, +1, TOL, "regressed") == REGRESSION
    assert status(straddling, +1, TOL, "clean") == NOTED  # ruled out beyond: a sure change
    assert status(straddling, +1, TOL, "more") == UNDETERMINED
    assert status(Change(0.0, -0.01, 0.01), +1, TOL, "clean") == PASS
    assert status(Change(-0.2), +1, TOL, "clean") == PASS  # "clean" rules a regression out


def test_a_regression_is_stored_as_fail():
    # results.json and every view read "fail" (record/results.schema.json).
    assert REGRESSION == "fail"
