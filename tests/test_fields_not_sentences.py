"""Views render a verdict's fields; no module reads its sentence back. Checked on the syntax
tree (tests/astscan.py), so a renamed pattern or a new alias cannot slip past a grep:

- no module applies a regex (``re.*`` or a compiled pattern's method) to a verdict's
  ``message`` (``["message"]``, ``.get("message")``, ``.message``, a local bound to one, or a
  parameter named for one);
- no module but core/contract.py compares a status word ("pass", "noted", "fail",
  "improved", "undetermined") as a bare literal: it compares ``core.contract``'s
  ``Status`` constants, so a misspelt word is a mypy error and the words live in one place.
"""

from __future__ import annotations

import ast

import pytest

from astscan import findings, regex_over_messages, status_comparisons

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


@pytest.mark.parametrize("code", [
    "re.search(r'x', verdict['message'])",
    "PATTERN.match(v.get('message', ''))",
    "_WORDS.findall(outcome.message)",
    "def f(v):\n    text = v['message']\n    return PATTERN.search(text)",
    "def f(message):\n    return PATTERN.search(message)",
    "re.sub(r'x', '', str(verdict['message']))",
], ids=["re-subscript", "get", "attribute", "via-local", "parameter", "wrapped"])
def test_the_scan_finds_a_regex_over_a_message(code: str) -> None:
    assert regex_over_messages(ast.parse(code)) != []


@pytest.mark.parametrize("code", [
    "re.search(r'x', line)",
    "verdict['message'].split(' — ')",
    "PATTERN.match(run_id)",
], ids=["other-text", "str-method", "not-a-message"])
def test_the_scan_leaves_other_regexes_alone(code: str) -> None:
    assert regex_over_messages(ast.parse(code)) == []


@pytest.mark.parametrize("code", [
    "v['status'] == 'fail'",
    "'undetermined' != status",
    "status in ('fail', 'improved')",
    "status not in {'pass', 'noted'}",
], ids=["eq", "ne-reversed", "in-tuple", "not-in-set"])
def test_the_scan_finds_a_bare_status_word(code: str) -> None:
    assert status_comparisons(ast.parse(code)) != []


@pytest.mark.parametrize("code", [
    "v['status'] == REGRESSION",
    "outcome == 'failed'",
    "status in STATUSES",
    "print('fail')",
], ids=["constant", "pytest-outcome", "collection", "not-compared"])
def test_the_scan_leaves_other_comparisons_alone(code: str) -> None:
    assert status_comparisons(ast.parse(code)) == []
