"""Robust summaries of repeated samples (median, MAD, relative spread), the constants that
turn them into standard errors, and the Student-t quantile every interval and test uses."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

import numpy as np

# Relative MAD above which a cell is too noisy to pass or fail on.
UNSTABLE_REL_MAD = 0.10
# For normal data MAD_TO_SIGMA·MAD estimates σ: a normal's MAD is the distance of its upper
# quartile from the median, σ·Φ⁻¹(0.75), so the factor is 1/Φ⁻¹(0.75) ≈ 1.4826.
MAD_TO_SIGMA = 1.0 / NormalDist().inv_cdf(0.75)
# For normal data the median of n samples has standard error MEDIAN_SE_FACTOR·σ/√n
# (√(π/2) ≈ 1.2533: the median needs π/2 times the mean's samples for the same precision).
MEDIAN_SE_FACTOR = math.sqrt(math.pi / 2)


def median_se(sd: float, n: int) -> float:
    """The standard error of a median of ``n`` samples whose spread is ``sd`` (normal data)."""
    return MEDIAN_SE_FACTOR * sd / math.sqrt(n)


@lru_cache(maxsize=1024)
def t_quantile(p: float, df: float) -> float:
    """The ``p`` quantile of Student's t with ``df`` degrees of freedom: P(T ≤ q) = p.

    One-sided by construction; a two-sided level L is ``t_quantile(0.5 + L / 2, df)`` (95 %:
    0.975). Large or infinite ``df`` gives the normal quantile. ``df ≤ 0`` (no spread
    estimate at all) gives ±inf, the limit as df → 0: no finite bound can be claimed.
    """
    if not 0.0 < p < 1.0:
        raise ValueError(f"t_quantile needs 0 < p < 1, got {p}")
    if df <= 0:
        return 0.0 if p == 0.5 else math.copysign(math.inf, p - 0.5)
    # scipy.special's kernel, the one scipy.stats.t.ppf calls: the same values without the
    # distribution object's argument checks, ~40x faster per call (the sweep benchmarks ask
    # for hundreds of thousands). Imported here: few pytest workers ever need a quantile.
    from scipy.special import stdtrit

    return float(stdtrit(df, p))


@dataclass(frozen=True)
class Summary:
    """Median, median absolute deviation and count of one metric over repeats."""

    median: float
    mad: float
    n: int

    @property
    def rel_mad(self) -> float:
        """MAD relative to the median (0 when the median is 0)."""
        return self.mad / abs(self.median) if self.median else 0.0

    @property
    def stable(self) -> bool:
        """True when the spread is small enough to judge on."""
        return self.rel_mad <= UNSTABLE_REL_MAD

    def to_dict(self) -> dict[str, float | int]:
        return {"median": self.median, "mad": self.mad, "n": self.n}

    @classmethod
    def from_dict(cls, data: dict[str, float | int]) -> Summary:
        return cls(float(data["median"]), float(data.get("mad", 0.0)), int(data.get("n", 1)))


def summarize(values: Sequence[float]) -> Summary:
    """Median and MAD of ``values`` (at least one)."""
    arr = np.asarray(values, dtype=float)
    med = float(np.median(arr))
    return Summary(median=med, mad=float(np.median(np.abs(arr - med))), n=len(arr))
