"""Robust summaries of repeated samples: median, MAD, relative spread."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Relative MAD above which a cell is too noisy to pass or fail on.
UNSTABLE_REL_MAD = 0.10


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
