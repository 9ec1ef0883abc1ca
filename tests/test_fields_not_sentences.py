"""Views render a verdict's fields; no module reads its sentence back. Checked on the syntax
tree (tests/astscan.py), so a renamed pattern or a new alias cannot slip past a grep:

- no module applies a regex (``re.*`` or a compiled pattern's method) to a verdict's
  ``message`` (``["message"]``, ``.get("message")``, ``.message``, a local bound to one, or a
  parameter named for one);
- no module guesses what a verdict judged from its id (``case_id.endswith(COMPARISONS)``,
  ``"-fit"``, ``== "sweep"``): it reads the verdict's ``scope`` through
  record/readers.py ``scope_of``, whose fallback for records written before 0.3 is the one
  place that may;
- no module but core/contract.py compares a status word ("pass", "noted", "fail",
  "improved", "undetermined") as a bare literal: it compares ``core.contract``'s
  ``Status`` constants, so a misspelt word is a mypy error and the words live in one place.
"""

from __future__ import annotations

import pytest

from astscan import (
    findings,
    kind_guesses,
    pytest_outcomes,
    regex_over_messages,
    status_comparisons,
)
from specperf.core.contract import PASS
from specperf.core.verdict import Scope, Verdict
from specperf.record.readers import scope_of

# What still parses a sentence, and why it may for now. Issue 48: every judge returns one
# Verdict with its figures, and views render those fields; until then these are listed.
SENTENCE_READERS = {
    # A parser or stream path verdict (judge/pathverdict.py) records its sentence alone: the
    # headline of its regression is the sentence's opening figure and the "… regression" it
    # names. Goes when path verdicts record their figures and factor (issue 48).
    ("views/headline.py", "_sentence_headline"),
}

# Bare status words still compared (issue 48): nothing may join this list.
STATUS_WORD_COMPARERS: set[tuple[str, str]] = set()


def test_no_module_reads_a_verdicts_sentence_with_a_regex() -> None:
    found = findings(regex_over_messages)
    assert found <= SENTENCE_READERS, "render the verdict's fields, not its sentence: " \
        f"{sorted(found - SENTENCE_READERS)}"


def test_status_words_are_compared_only_through_the_contract() -> None:
    found = findings(status_comparisons, skip=("core/contract.py",))
    new = sorted(found - STATUS_WORD_COMPARERS)
    assert not new, f"compare with core.contract's Status (PASS, REGRESSION, ...): {new}"


def test_the_allow_lists_hold_only_what_is_still_found() -> None:
    """An entry whose finding was fixed leaves the list, so it cannot hide a new one."""
    assert SENTENCE_READERS <= findings(regex_over_messages)
    assert STATUS_WORD_COMPARERS <= findings(status_comparisons, skip=("core/contract.py",))


# The one reader of a verdict's kind from its id: the fallback for records before 0.3.
KIND_GUESSERS = {("record/readers.py", "scope_of")}


def test_views_read_a_verdicts_scope_not_its_id() -> None:
    assert findings(kind_guesses) == KIND_GUESSERS, \
        "read the verdict's scope (record/readers.py scope_of), not its id"


def test_a_verdict_cannot_be_built_without_its_scope_and_records_it() -> None:
    with pytest.raises(TypeError, match="scope"):
        Verdict("padding-ctx13", PASS, "within tolerance")  # type: ignore[call-arg]
    recorded = Verdict("smoke subset", PASS, "ok", scope=Scope.SWEEP).to_dict()
    assert recorded["scope"] == "sweep" and scope_of(recorded) == "sweep"


@pytest.mark.parametrize(("old", "scope"), [
    ({"case_id": "sweep", "details": {}}, "sweep"),
    ({"case_id": "smoke subset", "details": {"step": {}, "acceptance:padding": {}}}, "sweep"),
    ({"case_id": "reasoning-ctx3333 chat vs native", "details": {}}, "path"),
    ({"case_id": "padding-fit", "details": {"slope": {}}}, "fit"),
    ({"case_id": "padding-ctx13", "details": {"step_ms": {}}}, "case"),
], ids=["sweep", "gate-sweep", "path", "fit", "case"])
def test_a_record_before_scope_is_read_by_its_id_and_details(old: dict, scope: str) -> None:
    """Records written before 0.3 carry no scope: their kind is read the way they wrote it,
    and a recorded scope wins over any id."""
    assert scope_of(old) == scope
    assert scope_of({**old, "scope": "concurrency"}) == "concurrency"


def test_only_conclude_turns_a_judgement_into_a_pytest_outcome() -> None:
    """plugin/conclude.py alone fails or skips a judged test (a verdict, or a reason there is
    none, recorded first); the perf tests users copy keep their own skips."""
    found = {module for module, _ in findings(pytest_outcomes, skip=("sim/", "perf_tests/"))}
    assert found == {"plugin/conclude.py"}, sorted(found)
