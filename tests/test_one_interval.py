"""One way to build a comparison's interval (core/interval.py), used by every judge: no
module outside core/ takes a quantile, hard-codes 1.96 or writes a median's standard error
itself, and no module but core/interval.py combines standard errors (read on the syntax
tree, tests/astscan.py: a root of a sum of squares or uncertainties, or a hypot). The
simulator, a separate server, is not the suite's judge."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from astscan import combined_errors, modules
from specperf.core import interval
from specperf.core.noise import NoiseModel
from specperf.core.stats import summarize

SRC = Path(__file__).resolve().parents[1] / "src" / "specperf"
OWN = re.compile(r"t_quantile\(|\bt95\(|\b1\.96\b|\bMEDIAN_SE_FACTOR\b|inv_cdf\(")


def test_no_judge_builds_an_interval_of_its_own() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel.startswith(("core/", "sim/")):
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if OWN.search(code) and not code.lstrip().startswith(("``", "-")):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "use specperf.core.interval:\n" + "\n".join(found)


# Modules that may combine uncertainties, and why.
COMBINERS = {
    "core/interval.py": "the one place every judge's standard errors combine",
    # A metric's run term is its common and own parts together: the noise model's own
    # definition, and core/interval.py imports core/noise.py (it cannot import back).
    "core/noise.py": "RunNoise.case_sd, the run term's σ",
}


def test_only_core_interval_combines_standard_errors() -> None:
    found = [f"{rel}:{line}" for rel, tree in modules() if rel not in COMBINERS
             for line in combined_errors(tree)]
    assert not found, "combine standard errors with specperf.core.interval " \
        "(se_of, combine, pooled_sd, case_run_sd):\n" + "\n".join(found)


def test_a_comparison_carries_both_medians_and_the_run_term() -> None:
    now, then = summarize([100.0, 102.0, 98.0, 101.0, 99.0]), summarize([95.0, 96.0, 94.0])
    quiet_se, quiet_df = interval.comparison(now, then, NoiseModel.same_night().of("tok_s"))
    night_se, night_df = interval.comparison(now, then, NoiseModel.prior(0.03).of("tok_s"))
    assert quiet_se == pytest.approx(math.hypot(interval.median_var(now)[0] ** 0.5,
                                                interval.median_var(then)[0] ** 0.5))
    # The prior's run term (both nights) adds whole; it is knowledge, so its df is the
    # medians' (Satterthwaite), and more than the request part alone would have.
    assert night_se == pytest.approx(math.sqrt(quiet_se**2 + 2 * 0.03**2))
    assert night_df > quiet_df
    low, high = interval.relative(0.05, 0.01)
    assert (low, high) == pytest.approx((math.expm1(0.05 - 1.959964 * 0.01),
                                         math.expm1(0.05 + 1.959964 * 0.01)), rel=1e-6)


@pytest.mark.parametrize("noise", [NoiseModel.prior(), NoiseModel.prior(0.2, stated=True),
                                   NoiseModel.same_night()], ids=["prior", "stated", "same"])
def test_what_repeats_cannot_shrink_is_the_comparison_less_this_runs_median(
        noise: NoiseModel) -> None:
    """The repeat rule stops once this run's median is small against :func:`fixed_se`: it is
    the comparison's variance less this run's median, so the rule and the verdict read one
    interval. On the same night it is the baseline's median alone."""
    now = summarize([100.0, 103.0, 98.0, 101.0])
    then = summarize([90.0, 92.0, 91.0, 95.0, 89.0])
    run = noise.of("step_ms")
    se, _ = interval.comparison(now, then, run, base_runs=3)
    fixed = interval.fixed_se(then, run, base_runs=3)
    assert se**2 == pytest.approx(interval.median_var(now)[0] + fixed**2, rel=1e-12)
    assert fixed**2 == pytest.approx(interval.median_var(then)[0]
                                     + run.comparison_var(1, 3), rel=1e-12)
    assert interval.fixed_ses({"step_ms": then}, noise, 3) == {"step_ms": fixed}
    if noise.same:
        assert fixed == pytest.approx(math.sqrt(interval.median_var(then)[0]))
    else:
        assert fixed > 3 * math.sqrt(interval.median_var(then)[0])


def test_the_helpers_combine_independent_parts() -> None:
    """What the judges now call instead of their own roots: the same arithmetic, bit for bit
    where a judge summed variances (``se_of``) or took a hypot (``combine``)."""
    assert interval.se_of(0.0009, 0.0016, 0.0) == math.sqrt(0.0009 + 0.0016 + 0.0)
    assert interval.combine(0.03, 0.04) == math.hypot(0.03, 0.04) == pytest.approx(0.05)
    assert interval.pooled_sd((0.02, 4.0), (0.04, 0.0)) == math.sqrt(0.02**2 * 4.0 / 4.0)
    assert interval.pooled_sd((0.02, 2.0), (0.04, 6.0)) == pytest.approx(
        math.sqrt((0.02**2 * 2 + 0.04**2 * 6) / 8), rel=1e-15)
    run = NoiseModel.prior(0.03).of("avg_commit")
    for runs in (1, 3):
        assert interval.case_run_sd(run, runs) == pytest.approx(
            math.sqrt(run.comparison_var(1, runs)), rel=1e-12)
    assert interval.case_run_sd(NoiseModel.same_night().of("avg_commit")) == 0.0
