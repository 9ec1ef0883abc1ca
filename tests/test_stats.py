"""The statistical constants and the Student-t quantile, against published exact values."""

from __future__ import annotations

import math

import pytest

from specperf.core.stats import MAD_TO_SIGMA, MEDIAN_SE_FACTOR, t_quantile


@pytest.mark.parametrize(("p", "df", "exact"), [
    (0.975, 1, 12.7062),    # two-sided 95 %, one degree of freedom
    (0.975, 2, 4.3027),
    (0.975, 5, 2.5706),
    (0.975, 11, 2.2010),    # between the old table's rows (it said 2.23)
    (0.975, 30, 2.0423),
    (0.975, 31, 2.0395),    # past the old table's end (it said 1.96)
    (0.975, 1e9, 1.9600),   # the normal's
    (0.975, math.inf, 1.9600),
    (0.995, 16, 2.9208),
    (0.99, 1e9, 2.3263),
    (0.025, 10, -2.2281),   # the lower tail: a quantile, not a two-sided bound
])
def test_t_quantile_matches_exact_values(p: float, df: float, exact: float) -> None:
    assert t_quantile(p, df) == pytest.approx(exact, abs=5e-5)


def test_without_degrees_of_freedom_no_finite_bound_is_claimed() -> None:
    assert t_quantile(0.975, 0) == math.inf
    assert t_quantile(0.025, 0) == -math.inf


def test_the_two_sided_95_percent_quantile() -> None:
    assert t_quantile(0.975, 1) == pytest.approx(12.7062, abs=5e-5)
    assert t_quantile(0.975, 31) == pytest.approx(2.0395, abs=5e-5)


def test_t_quantile_rejects_a_probability_outside_0_1() -> None:
    with pytest.raises(ValueError, match="0 < p < 1"):
        t_quantile(1.0, 5)


def test_the_normal_constants() -> None:
    assert MAD_TO_SIGMA == pytest.approx(1.4826, abs=1e-4)
    assert MEDIAN_SE_FACTOR == pytest.approx(1.2533, abs=1e-4)
    assert MEDIAN_SE_FACTOR**2 == pytest.approx(math.pi / 2)
