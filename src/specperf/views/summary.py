"""The terminal side of a run: live progress lines and the closing incident-style table.

Results travel in each test report's ``user_properties`` (JSON), so the table is the same
with or without pytest-xdist: the controller reads the reports its workers send. The
closing block renders the run's results document (:mod:`specperf.record.results`, built once at
session end from those reports): its fits and its "unexplained by the model" lines are the
record's, the same as report.html and results.json show.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import pytest

from ..core.contract import IMPROVED, REGRESSION
from ..core.fingerprint import deployment_name, pinned_line
from ..core.limits import NOT_JUDGED_PROPERTY
from ..core.model import ContextFit
from ..judge import exact
from ..judge.pathverdict import UNMEASURED
from ..measure.sample import Sample
from ..record import results
from ..record.readers import scope_of
from ..settings.config import Settings
from ..settings.hints import update_command
from . import decision, screen
from .headline import headline

COLLECTOR_NAME = "specperf-collector"


def sample_line(sample: Sample, total: int) -> str:
    """One finished request, printed as it completes so a long sweep never looks hung."""
    commit = sample.avg_commit
    step = sample.step_ms
    number = sample.repeat + 1
    # Past the planned repeats the case is noisy or near its limit: say so, not "4/3".
    kind = "warm-up" if sample.warmup else (
        f"repeat {number}/{total}" if number <= total else f"extra repeat {number} (noisy or "
                                                           "near its limit)")
    retried = (f", sent {sample.retries + 1} times (the server answered a transient error)"
               if sample.retries else "")
    return (f"{sample.case_id} {kind}: {sample.tok_s:.1f} tok/s, avg commit "
            f"{'n/a' if commit is None else f'{commit:.2f}'}, step "
            f"{'n/a' if step is None else f'{step:.1f} ms'}{retried}")


# eq=False keeps it hashable: pytest hashes registered plugins when a sub-directory has its
# own conftest (tests/real), and a dataclass with __eq__ has no __hash__.
@dataclass(eq=False)
class Collector:
    """Gathers measurements, verdicts and outcomes from test reports (controller side)."""

    measurements: dict[str, dict[str, Any]] = field(default_factory=dict)
    verdicts: list[dict[str, Any]] = field(default_factory=list)
    server: dict[str, Any] = field(default_factory=dict)
    fingerprint_notes: list[str] = field(default_factory=list)
    paths: list[dict[str, Any]] = field(default_factory=list)
    outcomes: dict[str, str] = field(default_factory=dict)
    errors: int = 0
    failures: int = 0
    footer: list[str] = field(default_factory=list)
    # Perf tests only (they carry a specperf_case property): what the run's kind is read from.
    perf_outcomes: dict[str, str] = field(default_factory=dict)
    smoke: set[str] = field(default_factory=set)
    scaling_cases: set[str] = field(default_factory=set)
    # The run's results document, once built at session end (reportplugin.ReportPlugin).
    record: dict[str, Any] | None = None
    # Samples of cases that errored before they were measured, by case id (record: partial).
    partials: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Per perf test that errored, the suite error's class and its bases (record.runkind).
    error_kinds: dict[str, list[str]] = field(default_factory=dict)
    # The concurrency levels measured (measure/burst.py Level.to_dict), by level id.
    concurrency: dict[str, dict[str, Any]] = field(default_factory=dict)
    # The concurrency_scaling tests (node ids) and the concurrency baseline they compared
    # with (plugin/burstfixtures.py BurstRun.baseline_record), as the measuring process saw it.
    concurrency_tests: set[str] = field(default_factory=set)
    concurrency_baseline: dict[str, Any] | None = None
    # Perf tests skipped without a verdict (no baseline entry, nothing to fit), by case id:
    # the closing block says why, as their verdicts' words are said (decision.verdict_words).
    skipped: dict[str, str] = field(default_factory=dict)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self._perf(report)
        for key, value in report.user_properties:
            if key == "specperf_measurement" and report.when == "setup":
                data = json.loads(str(value))
                self.measurements[data["case"]["id"]] = data
            elif key == "specperf_verdict" and report.when == "call":
                verdict = json.loads(str(value))
                # One path measurement judged by two tests (the parser case and the gate's)
                # is one verdict, listed once.
                if verdict not in self.verdicts:
                    self.verdicts.append(verdict)
            elif key == "specperf_server" and not self.server:
                self.server = json.loads(str(value))
            elif key == "specperf_paths" and report.when == "setup":
                self.paths.append(json.loads(str(value)))
            elif key == "specperf_fingerprint_notes":
                self.fingerprint_notes = json.loads(str(value))
            elif key == "specperf_partial":
                data = json.loads(str(value))
                self.partials.setdefault(data["case"]["id"], data)
            elif key == "specperf_concurrency" and report.when == "setup":
                data = json.loads(str(value))
                self.concurrency.setdefault(data["id"], data)
            elif key == "specperf_concurrency_baseline" and self.concurrency_baseline is None:
                self.concurrency_baseline = json.loads(str(value))
            elif key == "specperf_error" and report.failed:
                self.error_kinds[report.nodeid] = json.loads(str(value))
        if report.failed or report.when == "call" or report.skipped:
            self.outcomes[report.nodeid] = ("error" if report.failed and report.when != "call"
                                            else report.outcome)
        if report.failed and report.when != "call":
            self.errors += 1
        elif report.failed:
            self.failures += 1


    def _perf(self, report: pytest.TestReport) -> None:
        case = next((str(v) for k, v in report.user_properties if k == "specperf_case"), None)
        if case is None:
            return
        judged = any(k == "specperf_verdict" for k, _ in report.user_properties)
        reason = next((str(v) for k, v in report.user_properties if k == NOT_JUDGED_PROPERTY),
                      None)
        if report.skipped and not judged and reason is not None:  # plugin/conclude.py
            self.skipped[case] = reason
        elif report.skipped and not judged and isinstance(report.longrepr, tuple):
            # a skip of the test's own (pytest.skip in a perf test): pytest's words
            self.skipped[case] = str(report.longrepr[2]).removeprefix("Skipped: ")
        if report.failed or report.when == "call" or report.skipped:
            self.perf_outcomes[report.nodeid] = ("error" if report.failed and
                                                 report.when != "call" else report.outcome)
        if "smoke" in report.keywords:
            self.smoke.add(report.nodeid)
        if "context_scaling" in report.keywords:
            self.scaling_cases.add(case)
        if "concurrency_scaling" in report.keywords:
            self.concurrency_tests.add(report.nodeid)


def collected(config: pytest.Config) -> Collector:
    found = config.pluginmanager.get_plugin(COLLECTOR_NAME)
    assert isinstance(found, Collector)
    return found


def _num(summaries: dict[str, Any], metric: str, fmt: str) -> str:
    entry = summaries.get(metric)
    return format(entry["median"], fmt) if entry else "n/a"


def table(measurements: dict[str, dict[str, Any]]) -> list[str]:
    """context | class | tok/s | avg commit | step ms | decode tok/s | TTFT ms | n, like the
    incident's (TTFT: prefill, the time to first token)."""
    head = (f"{'context':>8} | {'class':<10} | {'tok/s':>7} | {'avg commit':>10} | "
            f"{'step ms':>7} | {'decode tok/s':>12} | {'TTFT ms':>7} | {'n':>2}")
    lines = [head, "-" * len(head)]
    rows = sorted(measurements.values(),
                  key=lambda d: (d["case"]["text_class"], d["case"]["context"]))
    for data in rows:
        s = data["summaries"]
        n = s.get("tok_s", {}).get("n", 0)
        lines.append(f"{data['case']['context']:>8} | {data['case']['text_class']:<10} | "
                     f"{_num(s, 'tok_s', '7.1f')} | {_num(s, 'avg_commit', '10.2f')} | "
                     f"{_num(s, 'step_ms', '7.1f')} | {_num(s, 'decode_tok_s', '12.1f')} | "
                     f"{_num(s, 'ttft_ms', '7.1f')} | {n:>2}")
    return lines


def fit_lines(fits: dict[str, dict[str, Any]]) -> list[str]:
    """The record's context fits, one line per text class."""
    lines = []
    for name, data in sorted(fits.items()):
        fit = ContextFit.from_dict(data)
        slope = f"{fit.b_ms_per_1k:.2f}"
        if fit.b_se_ms_per_1k is not None:
            slope += f" ± {fit.b_se_ms_per_1k:.2f}"
        lines.append(f"fit {name}: step_ms = {fit.a_ms:.1f} + {slope} ms per 1k context "
                     f"(residual {fit.residual_ms:.2f} ms, {fit.n_points} contexts; context = "
                     f"prompt + output/2)")
    return lines


def render(found: Collector, settings: Settings, detail: bool = False) -> list[str]:
    """The closing block: the first screen (:mod:`specperf.views.screen`: the decision, its
    root causes, what the run could see, the table), then with ``detail`` (pytest's ``-v``)
    who was measured, the fits and every verdict's line — rendered from the run's record, so
    it reads the same when xdist workers did the measuring."""
    doc = found.record or bare_record(found)
    tab: list[str] = []
    if doc["measurements"] or not doc.get("concurrency"):  # a concurrency run: its own table
        tab = table(doc["measurements"])
    tab += concurrency_lines(doc.get("concurrency"))
    lines = screen.render(doc, context_lines(found, doc, settings), tab, found.skipped,
                          notes=note_lines(found, doc, settings))
    lines += retry_lines(doc) + missing_baseline_lines(doc, settings)
    if detail:
        lines += ["", "detail (-v):"] + header_lines(doc, settings) + fit_lines(doc["fits"])
        lines += [*verdict_lines(doc), *decision.verdict_words(doc, found.skipped)]
        lines += [line for line in (decision.resolution_line(doc),) if line]
        if doc.get("verdicts"):
            lines.append(f"decision: {decision.decide(doc).line()}")
    return lines + found.footer


def context_lines(found: Collector, doc: dict[str, Any], settings: Settings) -> list[str]:
    """What the verdicts were against, and what makes the figures unlike production's: a
    simulator, pinned acceptance."""
    server = doc["server"]
    against = compared_with(doc, settings, short=True)
    simulated = ""
    if server.get("simulated"):
        simulated = " \u00b7 SIMULATED (simulated time)"
    lines = [f"{against[:1].upper()}{against[1:]} \u00b7 {settings.output_tokens} output "
             f"tokens{simulated}"]
    return lines + pinned_line(doc.get("fingerprint") or server.get("fingerprint") or {})


def note_lines(found: Collector, doc: dict[str, Any], settings: Settings) -> list[str]:
    """What makes the server unlike the one it was compared with, said right under the
    causes: a fingerprint that differs, an A/B run's sides."""
    server = doc["server"]
    lines: list[str] = []
    # As the measuring process worded them (in A/B mode: against production, not a baseline).
    reference = "PRODUCTION" if settings.compare_endpoint is not None else "THE BASELINE"
    lines += [f"FINGERPRINT DIFFERS FROM {reference}: {n}" for n in found.fingerprint_notes]
    if settings.compare_endpoint is not None:
        lines.append(f"A/B: the table is the candidate's ({server.get('url') or settings.endpoint}"
                     f"); production's medians ({settings.compare_endpoint}) are in each "
                     "verdict, read production \u2192 candidate.")
    return lines


def header_lines(doc: dict[str, Any], settings: Settings) -> list[str]:
    """Who was measured and how, in full (the detail's first line)."""
    server = doc["server"]
    lines = [f"specperf \u2014 {server.get('label', '?')}; {server.get('server_name', '?')}; "
             f"acceptance from {server.get('acceptance_source', '?')}; "
             f"{settings.output_tokens} output tokens, ignore_eos, non-streaming; "
             f"{compared_with(doc, settings)}"]
    if server.get("simulated"):
        profile = server.get("fingerprint", {}).get("sim_profile") or settings.sim_profile
        lines.append(f"SIMULATED: profile {profile} at time scale "
                     f"{server.get('time_scale', 1):g}; figures are in simulated time.")
    return lines + pinned_line(doc.get("fingerprint") or server.get("fingerprint") or {})


def retry_lines(doc: dict[str, Any]) -> list[str]:
    """Requests sent again, so a run that passed through server errors or foreign traffic
    says so here, not only in report.html: the client's retries after a transient error
    (a 5xx, a dropped connection) and the traffic guard's re-measured attempts."""
    retried: dict[str, int] = {}
    disturbed: dict[str, int] = {}
    for case_id, data in sorted(doc.get("measurements", {}).items()):
        for s in data.get("samples", []):
            retried[case_id] = retried.get(case_id, 0) + int(s.get("retries") or 0)
            again = (s.get("raw") or {}).get("discarded_attempts") or []
            disturbed[case_id] = disturbed.get(case_id, 0) + len(again)
    lines = []
    for counts, what in ((retried, "sent again after a transient server error"),
                         (disturbed, "measured again because the traffic guard saw a "
                                     "disturbed attempt")):
        total = sum(counts.values())
        if total:
            where = ", ".join(f"{c} {n}" for c, n in counts.items() if n)
            lines.append(f"retries: {total} request{'s' if total != 1 else ''} {what} "
                         f"({where}); every figure above is from an attempt that completed "
                         "cleanly.")
    return lines


def compared_with(doc: dict[str, Any], settings: Settings, short: bool = False) -> str:
    """What the verdicts are against, for the header line: 'baseline sim-x v3', production,
    and the concurrency baseline when concurrency levels were measured (alone, when only
    the concurrency tests ran: the main baseline was not compared with)."""
    if settings.compare_endpoint is not None:
        return f"compared with production {settings.compare_endpoint} (A/B, same run)"
    parts = []
    if (doc.get("run") or {}).get("kind") != "concurrency":
        base = doc.get("baseline")
        if base is None:
            parts.append("no baseline" if not settings.update_baselines
                         else "writing a baseline")
        else:
            parts.append(f"baseline {base['deployment']} v{base['version']} "
                         f"({str(base['created'])[:10]})" if short else
                         f"baseline {base['deployment']} v{base['version']} "
                         f"({_where(base)}created {base['created']})")
    if doc.get("concurrency"):
        parts.append(concurrency_compared(doc.get("concurrency_baseline"), settings))
    return "; ".join(parts)


def _where(base: dict[str, Any]) -> str:
    """The directory a baseline was read from, when the record says: 'in DIR; '."""
    if not base.get("directory"):
        return ""
    if base.get("shipped"):
        return (f"the simulator's reference shipped with specperf, in {base['directory']}, "
                "as no --baseline-dir was given and baselines/ holds none; ")
    return f"in {base['directory']}; "


def concurrency_compared(base: dict[str, Any] | None, settings: Settings) -> str:
    """'concurrency baseline sim-x v2 (<path>, created …)', or why there is none."""
    if base is None:
        return ("writing a concurrency baseline" if settings.update_baselines
                else "no concurrency baseline")
    text = (f"concurrency baseline {base['deployment']} v{base['version']} ({base['path']}, "
            f"created {base['created']})")
    return text if base.get("not_judged") is None else \
        f"{text} NOT compared: {base['not_judged']}"


def missing_baseline_lines(doc: dict[str, Any], settings: Settings) -> list[str]:
    """Why nothing was judged and the command that fixes it, every time there is no baseline:
    the cases' skip reasons show only with -rs, and a run of skips exits 0."""
    if settings.update_baselines or settings.compare_endpoint is not None:
        return []
    lines = []
    if doc.get("concurrency") and doc.get("concurrency_baseline") is None:
        command = update_command(settings).replace("-m context_scaling",
                                                   "-m concurrency_scaling")
        lines.append("NOT JUDGED: no concurrency baseline in "
                     f"{settings.baseline_dir}: the concurrency levels above are measured but "
                     f"compared with nothing; create one with `{command}`, then run again.")
    return lines + _missing_main(doc, settings)


def _missing_main(doc: dict[str, Any], settings: Settings) -> list[str]:
    if doc.get("baseline") is not None or not doc.get("measurements"):
        return []
    deployment = deployment_name(settings, doc["server"])
    # baselines/<deployment>/v<N>.json (baselines/store.py): one exists but was unreadable, so
    # every case errored with the reason and the fix.
    if any((settings.baseline_dir / deployment).glob("v*.json")):
        return []
    skipped = sum(1 for outcome in doc.get("outcomes", {}).values() if outcome == "skipped")
    return [f"NOT JUDGED: no baseline for deployment {deployment!r} in "
            f"{settings.baseline_dir.resolve()}"
            f"{f' ({skipped} skipped)' if skipped else ''}: the figures above are measured but "
            f"compared with nothing; create one with "
            f"`{update_command(settings, deployment, measuring=True)}`, then run again."]


def burst_line(case_id: str, burst: Any) -> str:
    """One finished burst (measure/burst.py Burst), printed as it completes."""
    kind = "warm-up" if burst.warmup else f"repeat {burst.repeat + 1}"
    per = [s.tok_s for s in burst.samples]
    return (f"{case_id}-c{burst.concurrency} burst {kind}: {min(per):.1f}–{max(per):.1f} tok/s "
            f"per request, aggregate {burst.agg_tok_s:.1f} tok/s")


def concurrency_lines(section: dict[str, Any] | None) -> list[str]:
    """The record's concurrency section: a row per level, the batch fit, GPU-seconds."""
    if not section or not section.get("levels"):
        return []
    head = (f"{'C':>3} | {'tok/s/user':>10} | {'aggregate':>9} | {'avg commit':>10} | "
            f"{'step ms':>7} | {'server step':>11} | {'Δ commit':>8} | {'Δ step':>7} | "
            f"{'GPU s':>6}")
    lines = ["", f"concurrency: {section['case']['id']} (bursts of C concurrent requests)",
             head, "-" * len(head)]
    for row in section["levels"]:
        lines.append(
            f"{row['concurrency']:>3} | {_opt(row['tok_s'], '10.1f')} | "
            f"{_opt(row['agg_tok_s'], '9.1f')} | {_opt(row['avg_commit'], '10.2f')} | "
            f"{_opt(row['step_ms'], '7.1f')} | {_opt(row['server_step_ms'], '11.1f')} | "
            f"{_opt_pct(row['commit_vs_c1'], 8)} | {_opt_pct(row['step_vs_c1'], 7)} | "
            f"{row['gpu_s']:6.1f}")
    fit = section.get("fit")
    if fit:
        se = fit.get("b_se_ms_per_token")
        slope = f"{fit['b_ms_per_token']:.2f}" + ("" if se is None else f" ± {se:.2f}")
        lines.append(f"batch fit: step_ms = {fit['a_ms']:.1f} + {slope} ms per request in the "
                     f"batch (residual {fit['residual_ms']:.2f} ms, {fit['n_points']} levels)")
    lines.append(f"GPU-seconds: {section['gpu_s']:.1f} s over {len(section['levels'])} levels "
                 "(sum of burst walls, server time)")
    return lines


def _opt(value: float | None, fmt: str) -> str:
    width = int(fmt.split(".")[0])
    return "n/a".rjust(width) if value is None else format(value, fmt)


def _opt_pct(value: float | None, width: int) -> str:
    return ("n/a" if value is None else f"{100 * value:+.1f}%").rjust(width)


def bare_record(found: Collector) -> dict[str, Any]:
    """What the summary reads of a record, for a session that built none (no report plugin):
    the same fields, derived by the same function, without a baseline to reconcile with."""
    return {"server": found.server, "measurements": found.measurements,
            "verdicts": found.verdicts, "reconcile": [],
            "fits": {k: f.to_dict() for k, f in results.run_fits(found.measurements).items()},
            "concurrency": results.concurrency_section(found.concurrency)}


def verdict_lines(doc: dict[str, Any]) -> list[str]:
    """Regressions, improvements, unexplained slowdowns, unmeasured and path verdicts."""
    verdicts: list[dict[str, Any]] = doc["verdicts"]
    lines = exact.summary_lines(verdicts)
    failing = [v for v in verdicts if v["status"] == REGRESSION]
    if failing:  # each whole sentence is under FAILURES (pytest) and in report.html
        lines.append(f"regressions ({len(failing)}), one line each (the sentences are under "
                     "FAILURES above and in report.html):")
        lines += [f"  {v['case_id']}: {headline(v)}" for v in failing]
    improved = [v for v in verdicts if v["status"] == IMPROVED]
    if improved:
        lines.append(f"better than the baseline ({len(improved)}):")
        lines += [f"  {v['case_id']}: {v['message']}" for v in improved]
    if failing or improved:
        lines += fingerprint_lines(doc)
    lines += [f"unexplained by the model: {r['case_id']}: {r['message']}"
              for r in results.unexplained(doc)]
    # Passing path comparisons still say what streaming and the chat route cost, and label
    # transport overhead (failing ones are among the regressions above).
    unmeasured = [v for v in verdicts if v.get("reason") == UNMEASURED]
    if unmeasured:
        lines.append(f"not measured, so not passed ({len(unmeasured)}):")
        lines += [f"  {v['case_id']}: {v['message']}" for v in unmeasured]
    paths = [v for v in verdicts
             if scope_of(v) == "path" and v["status"] != REGRESSION
             and v.get("reason") != UNMEASURED]
    if paths:
        lines.append(f"streaming and parser paths ({len(paths)}):")
        lines += [f"  {v['case_id']}: {v['message']}" for v in paths]
    return lines


def fingerprint_lines(doc: dict[str, Any]) -> list[str]:
    """Under changed cases, when the server is not the one the baseline measured: which
    fingerprint fields differ, so a faster (or slower) server points at why."""
    diffs: list[str] = doc.get("fingerprint_differences") or []
    base = doc.get("baseline")
    if not diffs or base is None:
        return []
    fields = ", ".join(d.split(":", 1)[0] for d in diffs)
    return [f"  the server's fingerprint differs from baseline v{base['version']}'s "
            f"({fields}: {'; '.join(diffs)}): these changes may be that server change, not "
            "the code under test; if the new server is intended, write a new baseline "
            "version with --specperf-update-baselines."]

