"""What changed between two versions of a baseline, one sentence each, for the review of a
new version: fingerprint, cases added or removed, medians and context fits that moved at the
precision people read them.
"""

from __future__ import annotations

from ..core.fingerprint import fingerprint_differences
from ..core.limits import ARROW, format_move, format_percent, format_value
from ..core.model import ContextFit
from ..measure.sample import METRICS
from .store import Baseline, CaseBaseline


def describe_changes(old: Baseline | None, new: Baseline) -> list[str]:
    """One sentence per change from ``old`` to ``new``: fingerprint, cases, medians, fits."""
    if old is None:
        return [f"first baseline of {new.deployment}: {len(new.cases)} cases "
                f"({', '.join(sorted(new.cases))})."]
    out = [f"fingerprint {d}" for d in fingerprint_differences(old.fingerprint, new.fingerprint)]
    out += [f"added {cid}" for cid in sorted(set(new.cases) - set(old.cases))]
    out += [f"removed {cid}" for cid in sorted(set(old.cases) - set(new.cases))]
    for cid in sorted(set(old.cases) & set(new.cases)):
        out += _case_changes(cid, old.cases[cid], new.cases[cid])
    for tc in sorted(set(old.fits) & set(new.fits)):
        out += _fit_change(tc, old.fits[tc], new.fits[tc])
    return out


def _case_changes(case_id: str, old: CaseBaseline, new: CaseBaseline) -> list[str]:
    out = []
    for metric in METRICS:
        before, after = old.metrics.get(metric), new.metrics.get(metric)
        if before is None or after is None:
            continue
        # Unchanged at the precision people read: not worth a line in the review.
        if format_value(metric, before.median) == format_value(metric, after.median):
            continue
        change = after.median / before.median - 1.0 if before.median else 0.0
        out.append(f"{case_id} {format_move(metric, before.median, after.median)} "
                   f"({_small_percent(change)})")
    return out


def _fit_change(text_class: str, old: ContextFit, new: ContextFit) -> list[str]:
    a, b = old.b_ms_per_1k, new.b_ms_per_1k
    if f"{a:.1f}" == f"{b:.1f}":
        return []
    change = b / a - 1.0 if a else 0.0
    return [f"{text_class} step time per 1k context {a:.1f} {ARROW} {b:.1f} ms "
            f"({_small_percent(change)})"]


def _small_percent(change: float) -> str:
    """A change that rounds to 0.0% is said to be that small, never printed as '+0.0%'
    beside two values that visibly differ (47.4 → 47.3)."""
    return format_percent(change) if abs(change) >= 0.0005 else "less than 0.1%"
