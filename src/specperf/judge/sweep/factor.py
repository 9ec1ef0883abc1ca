"""What the sweep-level test pools: each case's requests and baseline, and the factors.

The two factors of tok/s = avg commit / step time move many cases together, so the sweep
tests each once over all its cases: tok/s and step time over every case that has them,
acceptance (avg commit) per text class. A :class:`Factor` names one such test; a
:class:`CaseData` carries one case's requests now, its reference, and what a request costs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ...core.stats import Summary
from ...plan.workload import Case


@dataclass
class CaseData:
    """One case's requests now, its baseline, and what one more request costs."""

    case: Case
    run: dict[str, list[float]]
    base: dict[str, Summary]
    base_values: dict[str, list[float]] | None = None  # A/B: production's requests
    cost_s: float = 0.0  # server seconds of one more request (both arms in A/B)
    base_requests: dict[str, list[float]] | None = None  # a stored baseline's requests
    extra: int = 0  # requests added by the sweep test
    # Exact acceptance found every re-sent prompt's verify steps unchanged: its avg commit is
    # left out of ``run`` (no two medians may say it moved) and counts as no change.
    acceptance_settled: bool = False


@dataclass(frozen=True)
class Factor:
    """One test of the sweep: a metric over a set of cases, with its bad direction."""

    name: str  # "tok/s", "step" or "acceptance"
    metric: str
    sign: int  # +1: a rise is worse (step time); −1: a fall is worse (commit)
    scope: str  # "" for every case, else the text class
    case_ids: tuple[str, ...]

    @property
    def key(self) -> str:
        return self.name if not self.scope else f"{self.name}:{self.scope}"


def factors(cases: Sequence[CaseData]) -> list[Factor]:
    """Step time over every case with a step time; acceptance per text class."""
    out = []
    rated = tuple(c.case.id for c in cases if _has(c, "tok_s"))
    if rated:  # the product users feel: a drop split over both factors is still a drop
        out.append(Factor("tok/s", "tok_s", -1, "", rated))
    stepped = tuple(c.case.id for c in cases if _has(c, "step_ms"))
    if stepped:
        out.append(Factor("step", "step_ms", +1, "", stepped))
    for text_class in sorted({c.case.text_class for c in cases}):
        ids = tuple(c.case.id for c in cases
                    if c.case.text_class == text_class and _has(c, "avg_commit"))
        if ids:
            out.append(Factor("acceptance", "avg_commit", -1, text_class, ids))
    return out


def _has(data: CaseData, metric: str) -> bool:
    summary = data.base.get(metric)
    return len(data.run.get(metric, [])) >= 1 and summary is not None and summary.median > 0 \
        and all(v > 0 for v in data.run[metric])
