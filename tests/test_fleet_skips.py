"""A fleet's closing lines say why a box's test was skipped (README's fleet command showed
`PASS (10 passed, 1 skipped)` and nothing more: the sweep test's undetermined verdict)."""

from __future__ import annotations

import pytest

from specperf.fleet.record import SKIP_CHARS, EndpointRecord
from specperf.settings.endpoints import Endpoint

REASON = ("tok/s rose 2.8% across the sweep (95% CI −3.9% to +9.9%, 1 of 8 cases: "
          "reasoning-ctx5553) — the interval straddles the 2% sweep tolerance")


def _report(outcome: str, longrepr: object, when: str = "call") -> pytest.TestReport:
    return pytest.TestReport(
        "test_sweep.py::test_sweep[box1-sweep]", ("test_sweep.py", 1, "test_sweep"), {},
        outcome, longrepr, when,  # type: ignore[arg-type]
        user_properties=[("specperf_case", "sweep"), ("specperf_endpoint", "box1")])


def test_a_skipped_test_is_named_with_its_reason():
    record = EndpointRecord(Endpoint("box1", "http://127.0.0.1:1", "demo"))
    record.add(_report("skipped", ("sweepfixtures.py", 40, f"Skipped: {REASON}")))
    assert record.counts() == "1 skipped"
    assert record.skip_lines() == [f"specperf fleet: box1: test_sweep[box1-sweep] skipped: "
                                   f"{REASON}"]


def test_a_long_reason_is_cut_and_no_skip_no_line():
    record = EndpointRecord(Endpoint("box1", "http://127.0.0.1:1", "demo"))
    assert record.skip_lines() == []
    record.add(_report("skipped", ("f.py", 1, "Skipped: " + "x" * 500), when="setup"))
    [line] = record.skip_lines()
    assert line.endswith("x" * SKIP_CHARS + "…")
