"""Each AST scan of tests/astscan.py on code it must flag and code it must leave alone: the
guard tests (test_fields_not_sentences.py, test_one_interval.py) trust these scans, so a scan
that stopped finding what it names would let every guard pass."""

from __future__ import annotations

import ast
from collections.abc import Callable

import pytest

from astscan import (
    combined_errors,
    kind_guesses,
    pytest_outcomes,
    regex_over_messages,
    status_comparisons,
)

# (scan, code, whether the scan flags it, id)
CASES: list[tuple[Callable[[ast.Module], list[int]], str, bool, str]] = [
    (regex_over_messages, "re.search(r'x', verdict['message'])", True, 're-subscript'),
    (regex_over_messages, "PATTERN.match(v.get('message', ''))", True, 'get'),
    (regex_over_messages, '_WORDS.findall(outcome.message)', True, 'attribute'),
    (regex_over_messages, "def f(v):\n    text = v['message']\n    return PATTERN.search(text)",
     True, 'via-local'),
    (regex_over_messages, 'def f(message):\n    return PATTERN.search(message)', True, 'parameter'),
    (regex_over_messages, "re.sub(r'x', '', str(verdict['message']))", True, 'wrapped'),
    (regex_over_messages, "re.search(r'x', line)", False, 'other-text'),
    (regex_over_messages, "verdict['message'].split(' — ')", False, 'str-method'),
    (regex_over_messages, 'PATTERN.match(run_id)', False, 'not-a-message'),
    (status_comparisons, "v['status'] == 'fail'", True, 'eq'),
    (status_comparisons, "'undetermined' != status", True, 'ne-reversed'),
    (status_comparisons, "status in ('fail', 'improved')", True, 'in-tuple'),
    (status_comparisons, "status not in {'pass', 'noted'}", True, 'not-in-set'),
    (status_comparisons, "v['status'] == REGRESSION", False, 'constant'),
    (status_comparisons, "outcome == 'failed'", False, 'pytest-outcome'),
    (status_comparisons, 'status in STATUSES', False, 'collection'),
    (status_comparisons, "print('fail')", False, 'not-compared'),
    (kind_guesses, "v['case_id'].endswith(COMPARISONS)", True, 'comparisons'),
    (kind_guesses, "str(v.get('case_id', '')).endswith(pathverdict.COMPARISONS)", True,
     'comparisons-attribute'),
    (kind_guesses, "case.endswith('-fit')", True, 'fit'),
    (kind_guesses, "verdict['case_id'] == 'sweep'", True, 'sweep'),
    (kind_guesses, "'sweep' != v.case_id", True, 'sweep-reversed'),
    (kind_guesses, "scope_of(v) == 'sweep'", False, 'scope'),
    (kind_guesses, "path.endswith('.json')", False, 'other-suffix'),
    (kind_guesses, "check.kind == 'sweep'", False, 'not-an-id'),
    (combined_errors, 'se = math.sqrt(a_se**2 + b_se**2)', True, 'squares'),
    (combined_errors, 'se = np.sqrt(now + then_var)', True, 'variances'),
    (combined_errors, 'se = math.hypot(x, y)', True, 'hypot'),
    (combined_errors, 'se = (var_a + var_b) ** 0.5', True, 'pow'),
    (combined_errors, 'se = math.sqrt(sum(e * e for e in errors))', True, 'sum-of-products'),
    (combined_errors, 'se = sqrt(sum(v for v, _ in parts))', True, 'sum-of-parts'),
    (combined_errors,
     'def f(parts):\n    var = sum(v for v, _ in parts) + run\n    return math.sqrt(var)', True,
     'via-local'),
    (combined_errors, 'x = math.sqrt(2.0) * hw', False, 'constant'),
    (combined_errors, 'sd = math.sqrt(ss / n)', False, 'mean-square'),
    (combined_errors, 'r = math.sqrt(count)', False, 'one-name'),
    (combined_errors, 'se = interval.se_of(a**2, b)', False, 'the-helper'),
    (pytest_outcomes, 'import pytest\npytest.skip(reason)', True, 'skip'),
    (pytest_outcomes, 'import pytest\npytest.fail(message, pytrace=False)', True, 'fail'),
    (pytest_outcomes, "import pytest as p\np.skip('x')", True, 'aliased-module'),
    (pytest_outcomes, "from pytest import skip as s\ns('x')", True, 'aliased-function'),
    (pytest_outcomes, 'skip(reason)', False, 'unbound'),
    (pytest_outcomes, 'import pytest\nself.skip()', False, 'method'),
]


@pytest.mark.parametrize(("scan", "code", "flagged"), [c[:3] for c in CASES],
                         ids=[f"{c[0].__name__}-{c[3]}" for c in CASES])
def test_each_scan_flags_what_it_names_and_nothing_else(
        scan: Callable[[ast.Module], list[int]], code: str, flagged: bool) -> None:
    assert bool(scan(ast.parse(code))) == flagged, code
