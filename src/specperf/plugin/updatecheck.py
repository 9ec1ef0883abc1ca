"""A baseline update judges first: the verdicts this run reached against the current baseline
(the same ones a nightly reaches) decide whether the new version may be written.

A regression blocks the write unless ``--specperf-accept REASON`` accepts it; an undetermined
verdict blocks it too when its estimate leans the bad way (it might be the regression).
"""

from __future__ import annotations

import getpass
import os
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..core.contract import REGRESSION, UNDETERMINED
from ..core.verdict import Verdict


@dataclass(frozen=True)
class UpdateCheck:
    """What blocks an update: the verdicts that regressed or lean that way."""

    blocking: tuple[Verdict, ...]

    @property
    def clear(self) -> bool:
        return not self.blocking

    def named(self) -> str:
        """'8k (regression: step_ms); …': what regressed, in a phrase."""
        return "; ".join(f"{v.case_id} ({_word(v)}: {', '.join(_beyond(v)) or v.factor})"
                         for v in self.blocking)

    def refusal(self, command: str, noun: str = "baseline") -> str:
        """The one sentence an unaccepted update ends with (``noun``: which baseline)."""
        return (f"specperf: {noun} NOT updated: this run is worse than the current {noun} "
                f"in {self.named()}; if that is intended, accept it with `{command}`.")

    def accepted(self) -> list[dict[str, str]]:
        """The accepted verdicts, as the acceptance records them."""
        return [{"case": v.case_id,
                 "status": "regression" if v.status == REGRESSION else str(v.status.value),
                 "factor": v.factor,
                 "metrics": ",".join(_beyond(v)), "message": v.message}
                for v in self.blocking]


def _beyond(v: Verdict) -> list[str]:
    """The metrics whose point change lies beyond the limit, in its bad direction."""
    return [m for m, d in v.details.items()
            if "change" in d and "limit" in d and d["limit"] != 0
            and d["change"] / d["limit"] > 1.0]


def _word(v: Verdict) -> str:
    return "regression" if v.status == REGRESSION else "undetermined, beyond the limit"


def _leans_bad(v: Verdict) -> bool:
    """An undetermined verdict whose estimate lies beyond the limit: it may be a regression
    the run could not be sure of, and a baseline must not take it on unseen."""
    return v.status == UNDETERMINED and bool(_beyond(v))


def check(verdicts: Sequence[Verdict]) -> UpdateCheck:
    """The blocking verdicts among ``verdicts``."""
    return UpdateCheck(tuple(v for v in verdicts
                             if v.status == REGRESSION or _leans_bad(v)))


def who() -> str:
    """Who accepted: the CI run's URL when the environment names one, else user@host."""
    env = os.environ
    if env.get("GITHUB_SERVER_URL") and env.get("GITHUB_REPOSITORY") and env.get("GITHUB_RUN_ID"):
        return (f"{env['GITHUB_SERVER_URL']}/{env['GITHUB_REPOSITORY']}/actions/runs/"
                f"{env['GITHUB_RUN_ID']}")
    return f"{getpass.getuser()}@{socket.gethostname()}"


def acceptance(judged: UpdateCheck, reason: str) -> dict[str, Any]:
    """The acceptance a baseline file records: the reason, who, and the verdicts accepted."""
    return {"reason": reason, "who": who(), "verdicts": judged.accepted()}


def moved(verdicts: Sequence[Verdict]) -> dict[str, dict[str, dict[str, float]]]:
    """What moved against the previous version, per case and metric: the change and its
    interval where the judge had one (the verdicts' own figures, nothing recomputed)."""
    return {v.case_id: {m: {k: d[k] for k in ("change", "low", "high") if k in d}
                        for m, d in v.details.items() if "change" in d}
            for v in verdicts if v.details}


def lineage(previous: int | None, verdicts: Sequence[Verdict], judged: UpdateCheck,
            reason: str | None) -> dict[str, Any]:
    """Why a new version replaces ``previous`` (None: the deployment's first)."""
    accepted = acceptance(judged, reason) if reason is not None and not judged.clear else None
    return {"previous": previous, "moved": moved(verdicts) if previous else {},
            "accepted": accepted}
