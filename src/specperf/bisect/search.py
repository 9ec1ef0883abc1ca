"""The bisection: reproduce first, then one binary search per factor that moved.

Lifecycle (owned here, explained once): the good and the bad end are measured tonight
(``end_repeats`` requests per case, doubled while a factor's reproduction is unknown); a
factor that did not get worse is left alone; when none did, tok/s itself is bisected if it
fell (a cost outside the decode), and nothing at all means *not reproduced*. Each
moved factor is then bisected between the ends: the version nearest the middle of the open
range is deployed and measured (measurements are shared across factors), classified good,
bad or unknown against tonight's ends (``classify``), and an unknown one gets more requests
(doubling, as Chromium's Pinpoint does) up to ``max_repeats`` per case. A version that fails
to deploy or to serve is skipped and named, never blamed (``git bisect skip``); the next
nearest one is tried. Every measurement is charged to the GPU budget; when the next one
would not fit, the factors still open end *undecided* with their narrowed range.

The search talks to the box only through a :class:`Lab` (the real one in ``lab.py``, a
modelled one in benchmarks/bisect_power.py), so the tool and the benchmark run the same code.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from . import classify as cl
from .deploylog import Version

DEFAULT_REPEATS = 3


class DeployFailed(Exception):
    """A version the box could not deploy or serve: skipped, never blamed."""


class ServeFailed(DeployFailed):
    """A deployed version failed to serve the measured requests (a request errored or timed
    out, other traffic crossed a measured one). On a real box that often passes, so the
    version is deployed and measured once more before it is skipped; a deploy command that
    fails is not retried."""


class BudgetSpent(Exception):
    """The next measurement would exceed the GPU budget."""


@dataclass(frozen=True)
class Measured:
    """What one visit measured: per case, per metric, the requests' values; its GPU time."""

    figures: dict[str, dict[str, list[float]]]
    gpu_s: float


class Lab(Protocol):
    """The box a bisect works on."""

    def deploy(self, version: Version) -> None:
        """Put ``version`` on the box and wait until it serves it; DeployFailed if not."""

    def measure(self, version: Version, repeats: int) -> Measured:
        """``repeats`` more requests per case of the deployed version; DeployFailed if the
        server fails to serve them."""


@dataclass
class VersionState:
    """What the bisect knows of one version."""

    version: Version
    figures: dict[str, dict[str, list[float]]] = field(default_factory=dict)
    gpu_s: float = 0.0
    skipped: str = ""  # why it was skipped ("" when it was not)
    verdicts: dict[str, str] = field(default_factory=dict)  # factor name → good/bad/unknown

    @property
    def repeats(self) -> int:
        """Requests per case measured so far (the smallest over cases)."""
        counts = [len(v) for m in self.figures.values() for v in m.values()]
        return min(counts) if counts else 0

    def add(self, measured: Measured) -> None:
        for case, metrics in measured.figures.items():
            mine = self.figures.setdefault(case, {})
            for metric, values in metrics.items():
                mine.setdefault(metric, []).extend(values)
        self.gpu_s += measured.gpu_s

    def side(self, metric: str) -> cl.Side | None:
        return cl.side(self.figures, metric)


@dataclass(frozen=True)
class FactorResult:
    """One factor's bisection: "found" (culprit named), or "undecided" (with why)."""

    factor: cl.Factor
    status: str
    regression: cl.Change  # the bad end against the good end
    last_good: str
    first_bad: str
    culprit_change: cl.Change | None = None  # the first bad against the last good
    candidates: tuple[str, ...] = ()  # undecided: the versions the culprit may be
    reason: str = ""


@dataclass(frozen=True)
class Outcome:
    """A whole bisect: "found", "not-reproduced" or "undecided", and what it measured."""

    status: str
    good: str
    bad: str
    factors: tuple[FactorResult, ...]
    versions: tuple[VersionState, ...]
    ends: dict[str, cl.Change]  # factor name → bad against good, every factor
    reproduction: dict[str, str]  # factor name → yes / no / unsure
    gpu_s: float
    deploys: int
    budget_s: float


@dataclass
class Plan:
    """How much a bisect measures."""

    repeats: int = DEFAULT_REPEATS
    end_repeats: int = 4 * DEFAULT_REPEATS
    max_repeats: int = 8 * DEFAULT_REPEATS
    budget_s: float = math.inf
    factors: tuple[cl.Factor, ...] = cl.FACTORS
    fallback: cl.Factor | None = cl.THROUGHPUT  # bisected when none of ``factors`` moved
    min_change: float = cl.MIN_CHANGE


class Search:
    """One bisect over ``versions`` from ``good`` to ``bad`` on ``lab`` (module docstring)."""

    def __init__(self, lab: Lab, versions: Sequence[Version], good: Version, bad: Version,
                 plan: Plan | None = None, progress: Callable[[str], None] = lambda _: None
                 ) -> None:
        self.lab = lab
        self.plan = plan or Plan()
        self.states = [VersionState(v) for v in versions]
        self.good, self.bad = self.states[good.index], self.states[bad.index]
        self.progress = progress
        self.deployed: int | None = None
        self.deploys = 0
        self.ends_failed = ""  # why an end could not be measured more (then only versions are)

    @property
    def gpu_s(self) -> float:
        return sum(s.gpu_s for s in self.states)

    # -- measuring ------------------------------------------------------------------------
    def _cost_of(self, repeats: int) -> float:
        """The GPU seconds ``repeats`` more requests per case should take (from the past)."""
        done = [(s.gpu_s, s.repeats) for s in self.states if s.repeats]
        per_repeat = sum(g for g, _ in done) / max(sum(r for _, r in done), 1)
        return per_repeat * repeats

    def measure(self, state: VersionState, target: int) -> None:
        """Bring ``state`` to ``target`` requests per case (deploying it when needed)."""
        more = target - state.repeats
        if more <= 0:
            return
        if self.gpu_s + self._cost_of(more) > self.plan.budget_s:
            raise BudgetSpent
        for attempt in (1, 2):
            if self.deployed != state.version.index:
                self.deployed = None
                self.deploys += 1
                self.progress(f"deploying {state.version.name}")
                self.lab.deploy(state.version)
                self.deployed = state.version.index
            self.progress(f"measuring {state.version.name}: {more} request(s) per case")
            try:
                state.add(self.lab.measure(state.version, more))
                return
            except ServeFailed as exc:
                self.deployed = None
                if attempt == 2:
                    raise ServeFailed(f"{exc} (again after a redeploy)") from None
                self.progress(f"{state.version.name} failed to serve ({exc}): deploying it "
                              "once more")
            except DeployFailed:
                self.deployed = None
                raise

    def _sides(self, metric: str, state: VersionState
               ) -> tuple[cl.Side, cl.Side, cl.Side] | None:
        good, bad, mine = self.good.side(metric), self.bad.side(metric), state.side(metric)
        return None if good is None or bad is None or mine is None else (good, mine, bad)

    def ends_change(self, factor: cl.Factor) -> cl.Change | None:
        good, bad = self.good.side(factor.metric), self.bad.side(factor.metric)
        return None if good is None or bad is None else cl.change(good, bad, factor.metric)

    # -- reproducing ----------------------------------------------------------------------
    def reproduce(self) -> dict[str, str]:
        """Per factor: "yes" (it got worse tonight), "no", or "unsure" (unknown at the cap)."""
        target = self.plan.end_repeats
        while True:
            for state in (self.good, self.bad):
                self.measure(state, target)
            found = {f.name: cl.reproduced(self.ends_change(f), f, self.plan.min_change)
                     for f in self.plan.factors}
            if "unknown" not in found.values() or 2 * target > self.plan.max_repeats:
                return {k: ("unsure" if v == "unknown" else v) for k, v in found.items()}
            target *= 2

    # -- bisecting ------------------------------------------------------------------------
    def verdict(self, state: VersionState, factor: cl.Factor) -> str:
        """Classify ``state`` for ``factor``; while it is unknown, double the requests of the
        side that carries most of the doubt (the version, or both ends), up to the cap."""
        target = self.plan.repeats
        while True:
            self.measure(state, target)
            sides = self._sides(factor.metric, state)
            found = "unknown" if sides is None else cl.classify(*sides)
            state.verdicts[factor.name] = found
            if found != "unknown" or sides is None:
                return found
            ends = 2 * max(self.good.repeats, self.bad.repeats)
            if cl.ends_dominate(*sides) and ends <= self.plan.max_repeats \
                    and not self.ends_failed and self._top_up_ends(ends):
                continue
            target = 2 * max(target, state.repeats)
            if target > self.plan.max_repeats:
                return found

    def _top_up_ends(self, target: int) -> bool:
        """More requests of both ends; False (and never again) when an end's redeploy fails:
        a failing end is not the middle version's fault."""
        try:
            for end in (self.good, self.bad):
                self.measure(end, target)
        except DeployFailed as exc:
            self.ends_failed = str(exc)
            self.progress(f"the ends are not measured more: {exc}")
            return False
        return True

    def bisect(self, factor: cl.Factor, regression: cl.Change) -> FactorResult:
        """One factor's binary search between the ends."""
        lo, hi = self.good.version.index, self.bad.version.index
        while True:
            open_ = [i for i in range(lo + 1, hi) if not self.states[i].skipped]
            if not open_:
                return self._closed(factor, regression, lo, hi)
            mid = min(open_, key=lambda i: (abs(i - (lo + hi) / 2), i))
            state = self.states[mid]
            try:
                found = self.verdict(state, factor)
            except DeployFailed as exc:
                state.skipped = str(exc) or "failed to deploy"
                self.progress(f"skipping {state.version.name}: {state.skipped}")
                continue
            except BudgetSpent:
                return self._open(factor, regression, lo, hi, "the --budget-s limit was reached")
            if found == "unknown":
                return self._open(factor, regression, lo, hi,
                                  f"{state.version.name} stayed between good and bad at "
                                  f"{state.repeats} requests per case")
            lo, hi = (lo, mid) if found == "bad" else (mid, hi)

    def _closed(self, factor: cl.Factor, regression: cl.Change, lo: int, hi: int
                ) -> FactorResult:
        skipped = tuple(self.states[i].version.name for i in range(lo + 1, hi))
        last, first = self.states[lo], self.states[hi]
        if skipped:
            return FactorResult(factor, "undecided", regression, last.version.name,
                                first.version.name, None, (*skipped, first.version.name),
                                "only skipped versions are left between good and bad")
        sides = (last.side(factor.metric), first.side(factor.metric))
        step = cl.change(sides[0], sides[1], factor.metric) \
            if sides[0] is not None and sides[1] is not None else None
        return FactorResult(factor, "found", regression, last.version.name,
                            first.version.name, step)

    def _open(self, factor: cl.Factor, regression: cl.Change, lo: int, hi: int, why: str
              ) -> FactorResult:
        names = tuple(self.states[i].version.name for i in range(lo + 1, hi + 1))
        return FactorResult(factor, "undecided", regression, self.states[lo].version.name,
                            self.states[hi].version.name, None, names, why)

    # -- the whole bisect -----------------------------------------------------------------
    def run(self) -> Outcome:
        """Reproduce, then bisect every moved factor (DeployFailed from an end propagates)."""
        try:
            reproduction = self.reproduce()
        except BudgetSpent:
            return self._outcome("undecided", (), {f.name: "unsure" for f in self.plan.factors})
        moved = [f for f in self.plan.factors if reproduction[f.name] == "yes"]
        if not moved and self.plan.fallback is not None:
            fallback = self.plan.fallback
            reproduction[fallback.name] = cl.reproduced(self.ends_change(fallback), fallback,
                                                        self.plan.min_change)
            moved = [fallback] if reproduction[fallback.name] == "yes" else []
        if not moved:
            return self._outcome("not-reproduced", (), reproduction)
        results = []
        for factor in moved:
            regression = self.ends_change(factor)
            assert regression is not None  # reproduced: both ends have the metric
            results.append(self.bisect(factor, regression))
        found = all(r.status == "found" for r in results)
        return self._outcome("found" if found else "undecided", tuple(results), reproduction)

    def _outcome(self, status: str, results: tuple[FactorResult, ...],
                 reproduction: dict[str, str]) -> Outcome:
        ends = {f.name: c for f in cl.ALL_FACTORS if (c := self.ends_change(f)) is not None}
        return Outcome(status, self.good.version.name, self.bad.version.name, results,
                       tuple(self.states), ends, reproduction, self.gpu_s, self.deploys,
                       self.plan.budget_s)
