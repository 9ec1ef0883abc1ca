"""specperf bisect's logic on a modelled box: reproduce first, one bisection per moved factor,
skipped versions named and never blamed, unknown versions measured more, the GPU budget,
the deploy log, the deploy command, and the report's three views (docs/bisect.md)."""

from __future__ import annotations

import json
import math
import random
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from specperf.bisect import classify as cl
from specperf.bisect import report
from specperf.bisect.command import EXIT_OF, BisectExit
from specperf.bisect.deploylog import Version, load_versions, parse_versions, pick
from specperf.bisect.lab import BoxLab, deploy_argv, measuring_settings
from specperf.bisect.search import DeployFailed, Measured, Outcome, Plan, Search, ServeFailed
from specperf.cli import main
from specperf.core.errors import ConfigError
from specperf.core.limits import format_ci, format_percent
from specperf.views.screen import WIDTH
from test_first_screen import JARGON, MAX_WORDS, sentences

CASES = {"padding-ctx1663": (57.0, 7.85, 250.0), "reasoning-ctx1663": (57.0, 2.9, 250.0)}
TOK_S = 40.0


@dataclass(frozen=True)
class Truth:
    step: float = 1.0
    commit: float = 1.0
    prefill: float = 1.0
    toks: float = 1.0  # tok/s apart from the factors (a cost outside the decode)
    fails: bool = False
    noise: float = 0.02


class FakeLab:
    """Per request: each factor's level times its truth, with seeded relative noise."""

    def __init__(self, truths: list[Truth], seed: int = 1) -> None:
        self.truths = truths
        self.rng = random.Random(seed)
        self.deployed: list[str] = []
        self.requests: dict[str, int] = {}

    def deploy(self, version: Version) -> None:
        self.deployed.append(version.name)
        if self.truths[version.index].fails:
            raise DeployFailed("the deploy command exited 1: image not found")

    def measure(self, version: Version, repeats: int) -> Measured:
        t = self.truths[version.index]
        self.requests[version.name] = self.requests.get(version.name, 0) + repeats
        figures = {}
        for case, (step, commit, ttft) in CASES.items():
            def draw(level: float) -> list[float]:
                return [level * (1 + t.noise * self.rng.gauss(0, 1)) for _ in range(repeats)]
            figures[case] = {"step_ms": draw(step * t.step),
                             "avg_commit": draw(commit * t.commit),
                             "ttft_ms": draw(ttft * t.prefill),
                             "tok_s": draw(TOK_S * t.toks)}
        return Measured(figures, gpu_s=2.0 * repeats * len(CASES))


def _versions(n: int) -> list[Version]:
    return [Version(i, f"v{i:02d}") for i in range(n)]


def _bisect(truths: list[Truth], plan: Plan | None = None, seed: int = 1
            ) -> tuple[Outcome, FakeLab]:
    versions = _versions(len(truths))
    lab = FakeLab(truths, seed)
    return Search(lab, versions, versions[0], versions[-1], plan).run(), lab


def _history(n: int, **culprits: tuple[int, float]) -> list[Truth]:
    """``n`` versions; factor=(first bad index, multiplier) from that version on."""
    out = []
    for i in range(n):
        out.append(Truth(**{k: (m if i >= at else 1.0) for k, (at, m) in culprits.items()}))
    return out


# -- the search -------------------------------------------------------------------------------
def test_one_culprit_is_named_with_its_factor_alone() -> None:
    outcome, lab = _bisect(_history(16, step=(9, 1.06)))
    assert outcome.status == "found"
    assert EXIT_OF[outcome.status] == BisectExit.FOUND == 0
    [result] = outcome.factors
    assert (result.factor.name, result.first_bad, result.last_good) == ("step time", "v09", "v08")
    assert result.culprit_change is not None
    assert 0.0 < result.culprit_change.interval()[0] < result.culprit_change.relative < 0.12
    assert 0.0 < result.regression.interval()[0] < result.regression.relative < 0.12
    assert outcome.reproduction["step time"] == "yes"
    assert "yes" not in (outcome.reproduction["acceptance"], outcome.reproduction["prefill"])
    # ends, then at most ⌈log2 14⌉ + 1 middle versions
    assert sum(1 for v in outcome.versions if v.repeats) <= 2 + math.ceil(math.log2(14)) + 1


def test_two_culprits_on_two_factors_are_both_named_each_with_its_factor() -> None:
    outcome, _ = _bisect(_history(16, commit=(4, 0.9), step=(11, 1.08)))
    assert outcome.status == "found"
    named = {r.factor.name: r.first_bad for r in outcome.factors}
    assert named == {"acceptance": "v04", "step time": "v11"}


def test_versions_that_fail_to_deploy_are_skipped_named_and_never_blamed() -> None:
    truths = _history(16, step=(9, 1.06))
    truths[7] = truths[8] = Truth(fails=True)  # the middle of 0 … 15 and its next nearest
    outcome, lab = _bisect(truths)
    skipped = {v.version.name: v.skipped for v in outcome.versions if v.skipped}
    assert skipped == {"v07": "the deploy command exited 1: image not found",
                       "v08": "the deploy command exited 1: image not found"}
    # v06 good, v09 bad, nothing testable between: the range is named, as git bisect does
    [result] = outcome.factors
    assert (result.status, result.candidates, result.reason) == (
        "undecided", ("v07", "v08", "v09"), "only skipped versions are left between good and bad")
    assert EXIT_OF[outcome.status] == BisectExit.UNDECIDED == 6
    lines = report.text(report.to_dict(outcome, "http://box", 6)).splitlines()
    assert lines[0] == ("specperf bisect: undecided (exit 6): step time got worse at one of v07, "
                        "v08, v09.")
    assert "  skipped v07, v08, never blamed: the deploy command exited 1: image not found" \
        in lines
    assert "the first bad version is one of v07, v08, v09: only skipped versions are left" \
        in " ".join(sentences(lines))
    assert re.search(r"^ v07 +\| skipped +\|", "\n".join(lines), re.M)


def test_skips_away_from_the_culprit_still_name_it() -> None:
    truths = _history(16, step=(12, 1.06))
    truths[7] = Truth(fails=True)
    outcome, lab = _bisect(truths)
    assert [r.first_bad for r in outcome.factors] == ["v12"]
    assert "v07" in lab.deployed and [v.version.name for v in outcome.versions if v.skipped] \
        == ["v07"]


def test_a_regression_that_does_not_reproduce_stops_after_the_ends() -> None:
    outcome, lab = _bisect(_history(16))
    assert outcome.status == "not-reproduced"
    assert EXIT_OF[outcome.status] == BisectExit.NOT_REPRODUCED == 5
    assert outcome.factors == ()
    assert sorted(lab.requests) == ["v00", "v15"]
    doc = report.to_dict(outcome, "http://box", 5)
    lines = report.text(doc).splitlines()
    assert lines[0] == ("specperf bisect: the regression did not reproduce tonight (exit 5): no "
                        "factor got worse at v15.")
    # the ends' rows, and one line for the versions between them that were never measured
    assert [lines[-3][:20], lines[-2], lines[-1][:20]] == [
        " v00     | good end ", " v01 … v14 not measured (14 versions)", " v15     | bad end  "]
    assert "  The shift is not in these versions, or not on this box now." in lines


def test_a_tok_s_drop_no_factor_explains_is_bisected_as_tok_s() -> None:
    outcome, _ = _bisect(_history(16, toks=(5, 0.9)))  # e.g. a parser's post-processing
    assert outcome.status == "found"
    assert [(r.factor.name, r.first_bad) for r in outcome.factors] == [("tok/s", "v05")]
    assert outcome.reproduction["tok/s"] == "yes"
    doc = report.to_dict(outcome, "http://box", 0)
    lines = report.text(doc).splitlines()
    assert lines[0] == "specperf bisect: culprit found (exit 0): v05 made tok/s worse."
    assert lines[1].startswith("  tok/s \u2212")
    assert sentences(lines)[1].endswith(" at v05, the first bad version (v04 the last good);")
    assert sentences(lines)[2].endswith(
        " from v00 to v15 — check prefill, transport and the client")
    assert 'data-plot="bisect-tok_s"' in report.html(doc)


class ServesBadly(FakeLab):
    """Named versions fail to serve on their first ``times`` visits (a request timed out)."""

    def __init__(self, truths: list[Truth], times: dict[str, int]) -> None:
        super().__init__(truths)
        self.times = dict(times)

    def measure(self, version: Version, repeats: int) -> Measured:
        if self.times.get(version.name, 0) > 0:
            self.times[version.name] -= 1
            raise ServeFailed("the server failed to serve padding-ctx1663: read timed out")
        return super().measure(version, repeats)


def test_a_version_that_fails_to_serve_once_is_redeployed_and_decided() -> None:
    versions = _versions(16)
    lab = ServesBadly(_history(16, step=(9, 1.06)), {"v07": 1, "v15": 1})  # v15: the bad end
    outcome = Search(lab, versions, versions[0], versions[-1]).run()
    assert [v.version.name for v in outcome.versions if v.skipped] == []
    [result] = outcome.factors
    assert (result.status, result.first_bad) == ("found", "v09")
    assert lab.deployed.count("v07") >= 2 and outcome.versions[7].verdicts
    assert outcome.versions[7].repeats == lab.requests["v07"]  # nothing of the failed visit


def test_a_version_that_fails_to_serve_twice_is_skipped_saying_so() -> None:
    versions = _versions(16)
    lab = ServesBadly(_history(16, step=(9, 1.06)), {"v07": 2})
    outcome = Search(lab, versions, versions[0], versions[-1]).run()
    skipped = {v.version.name: v.skipped for v in outcome.versions if v.skipped}
    assert skipped == {"v07": "the server failed to serve padding-ctx1663: read timed out "
                              "(again after a redeploy)"}
    assert lab.deployed.count("v07") == 2
    [result] = outcome.factors
    assert (result.status, result.first_bad) == ("found", "v09")


class FirstVisitWild(FakeLab):
    """v03's first requests scatter ±15 % around the good level; later ones do not."""

    def measure(self, version: Version, repeats: int) -> Measured:
        measured = super().measure(version, repeats)
        if version.name == "v03" and self.requests["v03"] == repeats:
            for metrics in measured.figures.values():
                values = metrics["step_ms"]
                metrics["step_ms"] = [v * (1.15 if i % 2 else 0.85)
                                      for i, v in enumerate(values)]
        return measured


def test_an_unknown_version_gets_more_requests_until_it_is_decided() -> None:
    truths = [Truth(step=1.10 if i >= 6 else 1.0, noise=0.0) for i in range(8)]
    versions = _versions(8)
    lab = FirstVisitWild(truths)
    outcome = Search(lab, versions, versions[0], versions[-1],
                     Plan(repeats=2, end_repeats=8, max_repeats=64)).run()
    [result] = outcome.factors
    assert result.first_bad == "v06"
    v03 = outcome.versions[3]
    assert v03.verdicts["step time"] == "good"
    # unknown at 2, then doubled (4, 8, …) until the wild first pair is outweighed: good
    assert v03.repeats in (4, 8, 16, 32)
    assert lab.requests["v03"] == v03.repeats


def test_a_version_between_good_and_bad_stays_unknown_and_the_bisect_says_undecided() -> None:
    # v01 exactly half-way (in logs), every request alike: unknown at every look
    truths = [Truth(noise=0.0), Truth(step=1.04, noise=0.0), Truth(step=1.04**2, noise=0.0)]
    outcome, _ = _bisect(truths, Plan(repeats=3, end_repeats=12, max_repeats=24))
    [result] = outcome.factors
    assert (result.status, result.candidates) == ("undecided", ("v01", "v02"))
    assert result.reason == "v01 stayed between good and bad at 24 requests per case"
    assert outcome.versions[1].repeats == 24


class EndGoesDown(FakeLab):
    """The good end deploys once, then its image is gone."""

    def deploy(self, version: Version) -> None:
        if version.index == 0 and "v00" in self.deployed:
            self.deployed.append(version.name)
            raise DeployFailed("the deploy command exited 1: image v00 pruned")
        super().deploy(version)


def test_an_end_that_fails_to_redeploy_never_blames_the_version_being_decided() -> None:
    # v01 half-way and measured precisely: only more of the ends could decide it
    truths = [Truth(), Truth(step=math.sqrt(1.2), noise=0.001), Truth(step=1.2)]
    versions = _versions(3)
    lab = EndGoesDown(truths)
    plan = Plan(repeats=16, end_repeats=4, max_repeats=32, fallback=None,
                factors=(cl.factor_named("step time"),))
    search = Search(lab, versions, versions[0], versions[-1], plan)
    outcome = search.run()
    assert lab.deployed.count("v00") == 2  # the top-up of the ends was tried
    assert search.ends_failed == "the deploy command exited 1: image v00 pruned"
    assert [v.version.name for v in outcome.versions if v.skipped] == []
    [result] = outcome.factors
    assert (result.status, result.reason) == (
        "undecided", "v01 stayed between good and bad at 32 requests per case")


def test_the_gpu_budget_stops_the_bisect_undecided_with_the_range_it_narrowed() -> None:
    plan = Plan(repeats=3, end_repeats=12, max_repeats=24, budget_s=150.0, fallback=None,
                factors=(cl.factor_named("step time"),))
    outcome, _ = _bisect(_history(32, step=(20, 1.08)), plan)
    assert outcome.status == "undecided"
    [result] = outcome.factors
    assert result.reason == "the --budget-s limit was reached"
    assert "v20" in result.candidates
    assert outcome.gpu_s <= 150.0


def test_a_budget_below_the_ends_is_undecided_before_any_bisection() -> None:
    outcome, lab = _bisect(_history(8, step=(3, 1.2)), Plan(budget_s=10.0))
    assert (outcome.status, outcome.factors) == ("undecided", ())
    doc = report.to_dict(outcome, "http://box", 6)
    assert "spent before both ends were measured: raise --budget-s" in report.text(doc)


# -- the comparisons --------------------------------------------------------------------------
def _side(values: dict[str, list[float]]) -> cl.Side:
    found = cl.side({case: {"step_ms": v} for case, v in values.items()}, "step_ms")
    assert found is not None
    return found


def test_classify_is_good_bad_or_unknown_by_the_midpoint() -> None:
    good = _side({"a": [100, 101, 99, 100], "b": [50, 50.5, 49.5, 50]})
    bad = _side({"a": [110, 111, 109, 110], "b": [55, 55.5, 54.5, 55]})
    near_good = _side({"a": [101, 100, 102], "b": [50.2, 50.6, 49.9]})
    near_bad = _side({"a": [109, 110, 111], "b": [55.4, 54.6, 55]})
    middle = _side({"a": [105, 104, 106], "b": [52.6, 52.4, 52.5]})
    assert cl.classify(good, near_good, bad) == "good"
    assert cl.classify(good, near_bad, bad) == "bad"
    assert cl.classify(good, middle, bad) == "unknown"
    change = cl.change(good, bad, "step_ms")
    assert change is not None and change.relative == pytest.approx(0.10, abs=0.001)
    assert cl.reproduced(change, cl.factor_named("step time")) == "yes"
    assert cl.reproduced(change, cl.factor_named("acceptance")) == "no"  # a rise is no loss


def test_a_change_below_the_smallest_bisected_is_not_a_regression() -> None:
    step = cl.factor_named("step_ms")
    assert cl.reproduced(cl.Change(math.log(1.005), 0.0005, 4), step) == "no"
    assert cl.reproduced(cl.Change(math.log(1.03), 0.002, 4), step) == "yes"
    assert cl.reproduced(cl.Change(math.log(1.03), 0.015, 4), step) == "unknown"


# -- the deploy log and the deploy command ----------------------------------------------------
def test_the_deploy_log_reads_names_and_json_lines_oldest_first(tmp_path: Path) -> None:
    path = tmp_path / "versions.jsonl"
    path.write_text('# nightly deploys\nv1\n\n{"name": "v2", "image": "sglang:0.5.9", '
                    '"fingerprint": {"draft_model": "d2"}}\nv3\n', encoding="utf-8")
    versions = load_versions(path)
    assert [(v.index, v.name) for v in versions] == [(0, "v1"), (1, "v2"), (2, "v3")]
    assert versions[1].fields["image"] == "sglang:0.5.9"
    assert versions[1].expected_fingerprint == {"draft_model": "d2"}
    assert pick(versions, None, -1, "--bad").name == "v3"
    with pytest.raises(ConfigError,
                       match=r"--good 'v9' is not in the versions file \(v1, v2, v3\)"):
        pick(versions, "v9", 0, "--good")


@pytest.mark.parametrize(("text", "message"), [
    ("v1\nv1\n", "src line 2: version 'v1' is already on line 1"),
    ("v1\n", "src holds 1 version(s): a bisect needs at least a good and a bad one"),
    ('v1\n{"image": "x"}\n', 'src line 2: a JSON line needs a non-empty string "name"'),
    ("v1\n{oops\n", "src line 2: not a JSON object"),
])
def test_a_bad_deploy_log_is_a_usage_error_naming_the_line(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_versions(text, "src")


def test_the_deploy_command_is_split_without_a_shell_and_told_the_version() -> None:
    assert deploy_argv("ci/deploy.sh --image 'a b' {version}", "v7") == \
        ["ci/deploy.sh", "--image", "a b", "v7"]
    with pytest.raises(ConfigError, match=r"has no \{version\}"):
        deploy_argv("ci/deploy.sh", "v7")


def test_a_failing_deploy_command_is_a_skip_with_its_last_words(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch
                                                                ) -> None:
    monkeypatch.setenv("SPECPERF_LOCK_DIR", str(tmp_path))
    settings = measuring_settings("http://127.0.0.1:9", {}, {})
    command = f"{sys.executable} -c \"import sys; sys.exit('no image {{version}}')\""
    lab = BoxLab(settings, command, deploy_timeout_s=30.0)
    with pytest.raises(DeployFailed, match=r"^the deploy command exited 1: no image v3$"):
        lab.deploy(Version(3, "v3"))


def test_a_server_that_never_gets_healthy_is_a_skip_after_the_deadline() -> None:
    settings = measuring_settings("http://127.0.0.1:9", {}, {})  # nothing listens on port 9
    lab = BoxLab(settings, f"{sys.executable} -c pass {{version}}", deploy_timeout_s=0.2)
    with pytest.raises(DeployFailed, match=r"did not answer /health with 200 within 0.2 s"):
        lab.deploy(Version(1, "v1"))


def test_usage_errors_exit_2_before_any_deploy(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    versions = tmp_path / "versions.txt"
    versions.write_text("a\nb\nc\n", encoding="utf-8")
    base = ["bisect", "--endpoint", "http://127.0.0.1:9", "--versions", str(versions)]
    assert main([*base, "--deploy", "deploy.sh {version}", "--good", "c", "--bad", "a"]) == 2
    assert "--good 'c' (line position 3) must come before --bad 'a'" in capsys.readouterr().err
    assert main([*base, "--deploy", "deploy.sh"]) == 2
    assert main([*base, "--deploy", "x {version}", "--repeats", "0"]) == 2
    assert main([*base, "--deploy", "x {version}", "--contexts", "many"]) == 2
    assert "--contexts = 'many' is not valid" in capsys.readouterr().err


# -- the views --------------------------------------------------------------------------------
def _pct(change: dict[str, float]) -> str:
    return f"{format_percent(change['relative'])} ({format_ci(change['low'], change['high'])})"


def test_the_three_views_say_the_same_and_the_page_escapes_names() -> None:
    truths = _history(6, commit=(3, 0.85))
    versions = [Version(i, f"<b>v{i}</b>") for i in range(6)]
    outcome = Search(FakeLab(truths), versions, versions[0], versions[-1]).run()
    doc = report.to_dict(outcome, "http://box", 0)
    assert json.loads(report.to_json(doc))["factors"][0]["first_bad"] == "<b>v3</b>"
    text = " ".join(sentences(report.text(doc).splitlines()))
    assert re.search(r"acceptance: avg commit \u22121\d\.\d% \(95% CI \S+ to \S+\) at <b>v3</b>, "
                     r"the first bad version \(<b>v2</b> the last good\)", text)
    page = report.html(doc)
    assert "<b>v3</b>" not in page and "&lt;b&gt;v3&lt;/b&gt;" in page
    measured = sum(1 for v in outcome.versions if v.repeats)
    # each factor's axis draws a point per measured version (the good end at 0)
    assert page.count("<circle") == 3 * measured
    assert page.count('data-plot="bisect-') == 3


SCREENS = {  # the outcomes the text says, each in one screen
    "two culprits": (_history(16, commit=(4, 0.9), step=(11, 1.08)), None),
    "three culprits": (_history(16, prefill=(4, 1.3), commit=(6, 0.9), step=(11, 1.08)), None),
    "skipped around the culprit": (
        [Truth(fails=True) if i in (7, 8) else t
         for i, t in enumerate(_history(16, step=(9, 1.06)))], None),
    "tok/s alone": (_history(16, toks=(5, 0.85)), None),
    "not reproduced": (_history(16), None),
    "budget spent midway": (_history(16, step=(9, 1.06)), Plan(budget_s=150.0)),
    "budget below the ends": (_history(8, step=(3, 1.2)), Plan(budget_s=10.0)),
}


def _logical(lines: list[str]) -> list[int]:
    """The index of each logical line (a wrapped one continues four columns further in)."""
    starts, base = [], 0
    for i, line in enumerate(lines):
        indent = len(line) - len(line.lstrip())
        if indent <= 2:  # 0: the decision and titles, 1: the table, 2: the rest
            starts.append(i)
            base = indent
        else:
            assert indent == base + 4, f"line {i} is indented {indent}: {line!r}"
    return starts


@pytest.mark.parametrize("name", SCREENS)
def test_the_text_answers_first_in_one_screen_of_plain_sentences(name: str) -> None:
    truths, plan = SCREENS[name]
    versions = [Version(i, f"build-{i:04d}") for i in range(len(truths))]  # long names
    outcome = Search(FakeLab(truths), versions, versions[0], versions[-1], plan).run()
    doc = report.to_dict(outcome, "http://127.0.0.1:30000", int(EXIT_OF[outcome.status]),
                         simulated=True)
    doc["restored"] = versions[-1].name
    lines = report.text(doc, ["  page: /tmp/bisect.html"]).splitlines()
    assert max(len(line) for line in lines) <= WIDTH
    starts = _logical(lines)
    logical = [" ".join(line.strip() for line in lines[a:b])
               for a, b in zip(starts, [*starts[1:], len(lines)], strict=True)]
    # the answer: which version made which factor worse (or why none was named)
    assert logical[0].startswith(f"specperf bisect: {report.HEADLINE[doc['status']]} "
                                 f"(exit {doc['exit_code']}): ")
    for f in doc["factors"]:
        assert (f"{f['first_bad']} made {f['factor']} worse" if f["status"] == "found" else
                f"{f['factor']} got worse at one of ") in logical[0]
    # then one line per factor with what to check; then what was compared, the cost, where
    # the page is, and the versions last
    for cause, f in zip(logical[1:], doc["factors"], strict=False):
        assert cause.startswith(f["factor"]) and " \u2014 check " in cause, cause
    order = [next(i for i, line in enumerate(lines) if line.startswith(head)) for head in
             ("  build-0000 (good)", "  cost: ", "  page: ", "versions of the range")]
    assert order == sorted(order)
    for sentence in sentences(lines):
        assert len(sentence.split()) <= MAX_WORDS, sentence
        assert not JARGON.search(sentence), sentence


def test_help_lists_every_option_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bisect", "--help"]) == 0
    out = capsys.readouterr().out
    options = re.findall(r"^  (--[\w-]+)", out, re.M)
    assert options == ["--endpoint", "--versions", "--deploy", "--good", "--bad",
                       "--from-history", "--results-db", "--budget-s", "--factor", "--repeats",
                       "--max-repeats", "--min-change",
                       "--contexts", "--classes", "--output-tokens", "--deploy-timeout",
                       "--restore", "--json", "--html"]
    assert "Exit 0 culprit found, 2 usage, 3 infrastructure, 5 not reproduced, 6 undecided" \
        in " ".join(out.split())


def test_the_text_and_json_name_the_runs_the_history_chose() -> None:
    outcome, _ = _bisect(_history(4, step=(2, 1.3)))
    doc = report.to_dict(outcome, "http://box", 0)
    doc["from_history"] = {
        "history": "reports",
        "good": {"version": "v00", "run_id": "r3", "created": "2026-12-01T02:00:00+00:00",
                 "fingerprint": {}, "failed": []},
        "bad": {"version": "v03", "run_id": "r7", "created": "2026-12-02T02:00:00+00:00",
                "fingerprint": {}, "failed": ["sweep"]}}
    assert ("ends from reports: v00 ran the last passing run r3 (2026-12-01T02:00:00+00:00), v03 "
            "the first failing run r7 (2026-12-02T02:00:00+00:00).") \
        in sentences(report.text(doc).splitlines())
    assert json.loads(report.to_json(doc))["from_history"]["bad"]["run_id"] == "r7"


def test_on_a_simulator_every_view_says_simulated_and_simulated_time() -> None:
    outcome, _ = _bisect(_history(4, step=(2, 1.3)))
    seconds = f"{outcome.gpu_s:.1f} s"
    real = report.to_dict(outcome, "http://box", 0)
    assert real["simulated"] is False
    lines = report.text(real).splitlines()
    assert lines[0] == "specperf bisect: culprit found (exit 0): v02 made step time worse."
    step, whole = (real["factors"][0][k] for k in ("culprit_change", "regression"))
    assert sentences(lines)[1:3] == [  # the culprit's step, the range's, what to check
        f"step time {_pct(step)} at v02, the first bad version (v01 the last good);",
        f"{format_percent(whole['relative'])} from v00 to v03 — check the kernels, attention "
        "backend and KV cache"]
    assert "  v00 (good) … v03 (bad) on http://box: 4 of 4 versions measured, each against " \
           "tonight's v00." in report.text(real).splitlines()
    assert f"\n  cost: {seconds} of GPU time, 4 deploys." in report.text(real)
    assert "SIMULATED" not in report.text(real) + report.html(real)
    sim = report.to_dict(outcome, "http://127.0.0.1:30000", 0, simulated=True)
    text = report.text(sim)
    assert ("v00 (good) … v03 (bad) on http://127.0.0.1:30000 (SIMULATED): 4 of 4 versions "
            "measured, each against tonight's v00.") in sentences(text.splitlines())
    assert f"\n  cost: {seconds} of simulated time," in text and "GPU time" not in text
    page = report.html(sim)
    assert '<span class="badge sim">SIMULATED</span>' in page
    assert "Simulated time" in page and "GPU time" not in page
    assert json.loads(report.to_json(sim))["simulated"] is True


def test_a_budget_spent_on_a_simulator_is_simulated_time() -> None:
    outcome, _ = _bisect(_history(8, step=(3, 1.2)), Plan(budget_s=10.0))
    doc = report.to_dict(outcome, "http://box", 6, simulated=True)
    assert ("  The budget (10 s of simulated time) was spent before both ends were measured: "
            "raise --budget-s.") in report.text(doc).splitlines()
