"""The verdict contract's one rule (core/contract.py): its truth table, every scope."""

from __future__ import annotations

from pathlib import Path

import pytest

from specperf.core.contract import (
    IMPROVED,
    NOTED,
    PASS,
    PRIORITY,
    REASONS,
    REGRESSION,
    STATUSES,
    UNDETERMINED,
    Change,
    combine,
    inside,
    median_status,
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


@pytest.mark.parametrize(("change", "direction", "want"), [
    # A case's medians with their interval: the median's side of the tolerance, the interval
    # says whether sure.
    (Change(-0.15, -0.18, -0.12), +1, REGRESSION),
    (Change(-0.12, -0.16, -0.08), +1, UNDETERMINED),  # beyond on the bad side, not surely
    (Change(-0.08, -0.12, -0.04), +1, NOTED),  # a median inside: no skip for its interval
    (Change(+0.15, +0.12, +0.18), +1, IMPROVED),
    # Beyond on the good side, not surely (as a real llama.cpp A/B: +45.6 %, 95 % +29.9 % to
    # +63.2 % against a 40 % limit): surely no regression, never a skip for more repeats.
    (Change(+0.15, +0.08, +0.22), +1, NOTED), (Change(-0.15, -0.22, -0.08), -1, NOTED),
    (Change(+0.12, -0.01, +0.25), +1, PASS),  # and no sure change at all
    (Change(+0.01, -0.02, +0.04), +1, PASS),
])
def test_a_median_is_undetermined_only_beyond_the_tolerance_on_its_bad_side(change, direction,
                                                                              want):
    assert median_status(change, direction, TOL) == want


def test_a_sequential_decision_decides_beyond_the_tolerance_the_interval_the_rest():
    straddling = Change(-0.09, -0.13, -0.05)
    assert status(straddling, +1, TOL, "regressed") == REGRESSION
    # "clean" rules out a change beyond the tolerance; "noted" would say the change is inside
    # it, which only an interval wholly inside shows.
    assert status(straddling, +1, TOL, "clean") == PASS
    assert status(straddling, +1, TOL, "more") == UNDETERMINED
    assert status(Change(0.0, -0.01, 0.01), +1, TOL, "clean") == PASS
    assert status(Change(-0.2), +1, TOL, "clean") == PASS  # "clean" rules a regression out


def test_a_regression_is_stored_as_fail():
    # results.json and every view read "fail" (record/results.schema.json).
    assert REGRESSION == "fail"


# -- the sequential policy: it settles only what the interval leaves open --------------------
SWEEP_TOL = 0.02


def test_a_clean_sequential_test_never_overrides_an_interval_wholly_beyond_the_tolerance():
    # Step time +3.5 % with its 95 % CI +2.5 % to +3.7 % against a 2 % sweep tolerance: the
    # whole interval is beyond, so a "clean" SPRT cannot make it "noted" (issue 33).
    rise = Change(0.035, 0.025, 0.037)
    assert status(rise, -1, SWEEP_TOL, "clean") == REGRESSION
    assert status(rise, -1, SWEEP_TOL, "more") == REGRESSION
    assert not inside(rise, -1, SWEEP_TOL)


def test_inside_holds_only_when_the_whole_interval_is_inside_the_tolerance():
    straddling = Change(0.018, 0.012, 0.024)
    assert status(straddling, -1, SWEEP_TOL, "clean") == PASS  # the SPRT ruled it out...
    assert not inside(straddling, -1, SWEEP_TOL)  # ...but no sentence may call it inside
    assert inside(Change(0.015, 0.010, 0.019), -1, SWEEP_TOL)
    assert inside(Change(-0.30, -0.35, -0.25), -1, SWEEP_TOL)  # faster: inside on the bad side
    assert inside(Change(-0.01), +1, SWEEP_TOL) and not inside(Change(-0.03), +1, SWEEP_TOL)


# -- one combine, one priority order ---------------------------------------------------------
@pytest.mark.parametrize(("parts", "want"), [
    ([PASS, NOTED, IMPROVED, UNDETERMINED, REGRESSION], REGRESSION),
    ([PASS, NOTED, IMPROVED, UNDETERMINED], UNDETERMINED),
    ([NOTED, IMPROVED, PASS], IMPROVED),
    ([PASS, NOTED], NOTED),
    ([PASS, PASS], PASS),
    ([], UNDETERMINED),
])
def test_combine_takes_the_first_status_of_the_one_priority_order(parts, want):
    assert combine(parts) == want
    assert combine(reversed(parts)) == want
    assert PRIORITY == (REGRESSION, UNDETERMINED, IMPROVED, NOTED, PASS)


def test_combine_refuses_a_word_outside_the_contract():
    with pytest.raises(ValueError) as info:
        combine([PASS, "no-baseline"])
    assert str(info.value) == ("not a verdict contract status: ['no-baseline']; the contract's "
                               "words are ['pass', 'noted', 'fail', 'improved', 'undetermined']")


def test_every_reason_goes_with_one_contract_status():
    assert REASONS == {"no-baseline": UNDETERMINED, "unmeasured": UNDETERMINED,
                       "explained": NOTED}
    assert set(REASONS.values()) <= set(STATUSES)


def test_a_misspelt_status_does_not_type_check(tmp_path) -> None:
    """Statuses are a type (core/contract.py Status): mypy rejects a verdict built with a
    word the contract does not have, and accepts the contract's own."""
    from mypy import api

    root = Path(__file__).resolve().parents[1]
    typo = tmp_path / "typo.py"
    typo.write_text("from specperf.core.contract import PASS\n"
                    "from specperf.judge.exact import ExactResult, ExactStatus\n"
                    "from specperf.core.verdict import Scope, Verdict\n\n"
                    "good = Verdict('padding-ctx13', PASS, 'ok', scope=Scope.CASE)\n"
                    "bad = Verdict('padding-ctx13', 'passs', 'ok', scope=Scope.CASE)\n"
                    "same = ExactResult(ExactStatus.UNCHANGED, 'identical verify steps')\n"
                    "odd = ExactResult('unchangd', 'identical verify steps')\n",
                    encoding="utf-8")
    out, _, code = api.run([str(typo), "--config-file", str(root / "pyproject.toml"),
                            "--cache-dir", str(root / ".mypy_cache")])
    assert code == 1, out
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert len(errors) == 2, out
    assert "typo.py:6:" in errors[0], out
    assert 'incompatible type "str"; expected "Status"' in errors[0], out
    # exact acceptance's own words are a type too
    assert "typo.py:8:" in errors[1], out
    assert 'incompatible type "str"; expected "ExactStatus"' in errors[1], out
