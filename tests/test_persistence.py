"""A regression that persists: the nights before tonight that failed the same way, against the
same baseline (record/persistence.py), read from history lines as runs write them."""

from __future__ import annotations

from typing import Any

from specperf.record.files import history_entry
from specperf.record.persistence import streak
from store_fixtures import doc


def night(day: int, hour: int = 2, *, failed: tuple[str, ...] = ("padding-ctx13",),
          factor: str = "step", version: int = 2, step: float = 0.15,
          **extra: Any) -> dict[str, Any]:
    """One run's record on 2026-12-<day>: ``failed`` cases regressed naming ``factor``, their
    step time ``step`` slower (interval ±4 %)."""
    run = doc(f"r{day}-{hour}", created=f"2026-12-{day:02d}T{hour:02d}:00:00Z")
    run["baseline"]["version"] = version
    for v in run["verdicts"]:
        if v["case_id"] in failed:
            v["status"], v["factor"] = "fail", factor
            v["details"]["step_ms"].update(change=step, low=step - 0.04, high=step + 0.04)
    run.update(extra)
    return run


def history(*runs: dict[str, Any]) -> list[dict[str, Any]]:
    return [history_entry(r, f"{r['run_id']}/results.json") for r in runs]


def test_the_same_regression_night_after_night_is_one_streak() -> None:
    found = streak(night(5), history(night(2), night(3), night(4)))
    assert found == {"since": "2026-12-02T02:00:00Z", "nights": 4, "runs": 4,
                     "cases": ["padding-ctx13"], "factor": "step"}


def test_runs_back_to_back_tonight_are_one_night() -> None:
    # Three reruns tonight (an hour apart) after one regressed night: 2 nights, not 4.
    found = streak(night(5, 4), history(night(4), night(5, 2), night(5, 3)))
    assert found is not None and (found["nights"], found["runs"]) == (2, 4)
    assert found["since"] == "2026-12-04T02:00:00Z"
    # Tonight's reruns alone are no streak: the regression is tonight's.
    assert streak(night(5, 4), history(night(5, 2), night(5, 3))) is None


def test_a_clean_night_another_factor_or_another_baseline_ends_it() -> None:
    clean = night(3, failed=())
    assert streak(night(5), history(night(2), clean, night(4)))["nights"] == 2  # type: ignore[index]
    acceptance = night(4, factor="acceptance")
    assert streak(night(5), history(night(3), acceptance)) is None
    older_baseline = night(4, version=1)
    assert streak(night(5), history(older_baseline)) is None


def test_a_new_regression_or_a_pass_has_no_streak() -> None:
    assert streak(night(5), []) is None
    assert streak(night(5, failed=()), history(night(4))) is None
    # Another case regressed before: tonight's case is new.
    assert streak(night(5), history(night(4, failed=("reasoning-ctx13",)))) is None


def test_the_decision_line_says_a_regression_is_not_new() -> None:
    from specperf.views.decision import decide
    tonight = night(5)
    tonight["persists"] = streak(tonight, history(night(2), night(3), night(3, 5), night(4)))
    line = decide(tonight).line()
    assert ("the same step-time regression in padding-ctx13 as on every night since "
            "2026-12-02 (4 nights, 5 runs)") in line, line
    new = night(5)
    new["persists"] = streak(new, [])
    assert "every night since" not in decide(new).line()


def test_a_regression_of_another_size_is_a_new_one() -> None:
    # Tonight's +15 % (11-19 %) against nights of +30 % (26-34 %): neither change lies in the
    # other's interval, so tonight's is a new regression though case and factor match.
    assert streak(night(5), history(night(3, step=0.30), night(4, step=0.30))) is None
    # +20 % (16-24 %) holds tonight's +15 %'s neighbourhood: one regression, the same size.
    found = streak(night(5), history(night(3, step=0.30), night(4, step=0.18)))
    assert found is not None and (found["nights"], found["since"]) == (2, "2026-12-04T02:00:00Z")
    # A record written before sizes were kept matches by case and factor, as before.
    old = history(night(4, step=0.30))
    del old[0]["failed_sizes"]
    assert streak(night(5), old) is not None


def test_the_history_line_keeps_each_regression_s_size() -> None:
    line = history(night(4, step=0.2))[0]
    assert line["failed_sizes"] == {"padding-ctx13": {"step_ms": [0.2, 0.16, 0.24]}}
