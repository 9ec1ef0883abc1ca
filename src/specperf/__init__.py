"""specperf: a pytest performance regression suite for speculative-decoding LLM endpoints.

The public surface, for a plugin author or a notebook (everything else is private and may
change between releases; docs/architecture.md says what each module owns)::

    import specperf

    settings = specperf.resolve({"endpoint": "http://127.0.0.1:30000"}, os.environ, {})
    session = specperf.PerfSession(settings)  # GPU lock, probe, prompts on first use
    try:
        runs = [session.measure(specperf.Case("reasoning", n, 600)) for n in (13, 3333)]
    finally:
        session.close()  # releases the lock (and stops the embedded simulator)
    fit = specperf.fit_repeats([(m.mean_context, specperf.step_repeats(m)) for m in runs])
    doc = specperf.load_results(Path("reports/<run>/results.json"))

Names load on first use (PEP 562), so ``import specperf`` stays cheap: the simulator and
the CLI start without numpy or httpx until they need them.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .core.version import __version__  # the one constant loaded eagerly

# name -> (module, attribute): the one documented API (docs/architecture.md lists it).
_PUBLIC: dict[str, tuple[str, str]] = {
    # settings
    "Settings": ("settings.config", "Settings"),
    "resolve": ("settings.config", "resolve"),
    # what is measured, and measuring it
    "Case": ("plan.workload", "Case"),
    "TextClass": ("plan.workload", "TextClass"),
    "load_text_classes": ("plan.workload", "load_text_classes"),
    "plan": ("plan.workload", "plan"),
    "generate_text": ("plan.workload", "generate"),
    "PromptPlan": ("plan.reuse", "PromptPlan"),
    "PerfSession": ("measure.session", "PerfSession"),
    "Measurement": ("measure.sample", "Measurement"),
    "Sample": ("measure.sample", "Sample"),
    "step_repeats": ("measure.sample", "step_repeats"),
    "decide_repeats": ("measure.repeats", "decide_repeats"),
    "RepeatDecision": ("measure.repeats", "RepeatDecision"),
    "fixed_ses": ("core.interval", "fixed_ses"),
    # servers: the simulator as a process, a server's Prometheus counters
    "SimProcess": ("servers.simulated", "SimProcess"),
    "parse_metrics": ("servers.acceptance", "parse_metrics"),
    # the model: throughput = avg commit / step time
    "ContextFit": ("core.model", "ContextFit"),
    "fit_context": ("core.model", "fit_context"),
    "fit_repeats": ("core.model", "fit_repeats"),
    "attribute": ("core.model", "attribute"),
    "predict_tok_s": ("core.model", "predict_tok_s"),
    "summarize": ("core.stats", "summarize"),
    "median_se": ("core.stats", "median_se"),
    # run-to-run noise (a night, a neighbour) and drift across nights
    "NoiseModel": ("core.noise", "NoiseModel"),
    "RunNoise": ("core.noise", "RunNoise"),
    "noise_from_history": ("core.noise", "from_history"),
    "DRIFT_SCAN": ("core.drift", "DRIFT_SCAN"),
    "drift_series": ("core.drift", "series"),
    "scan_drift": ("core.drift", "scan_night"),
    # verdicts
    "DEFAULT_TOLERANCES": ("core.limits", "DEFAULT_TOLERANCES"),
    "Verdict": ("core.verdict", "Verdict"),
    "NotJudged": ("core.verdict", "NotJudged"),
    "judge_case": ("judge.verdict", "judge_case"),
    "judge_fit": ("judge.fit", "judge_fit"),
    "pair_decider": ("measure.pair", "pair_decider"),
    "SweepCase": ("judge.sweep.factor", "CaseData"),
    "SweepResult": ("judge.sweep.verdict", "SweepResult"),
    "judge_sweep": ("judge.sweep.pooled", "judge_sweep"),
    # baselines, the record and its report
    "Baseline": ("baselines.store", "Baseline"),
    "CaseBaseline": ("baselines.store", "CaseBaseline"),
    "BaselineStore": ("baselines.store", "BaselineStore"),
    "RunInfo": ("record.results", "RunInfo"),
    "build_results": ("record.results", "build"),
    "write_results": ("record.files", "write"),
    "load_results": ("record.schema", "load"),
    "render_report": ("views.page", "render"),
    # the plugin's run, driven outside pytest (benchmarks, tools): plan, measure, judge
    "RunState": ("plugin.runstate", "RunState"),
    "judge_run_sweep": ("plugin.sweeprun", "judge"),
    "sweep_budget": ("plugin.sweeprun", "budget"),
    # errors (infrastructure problems; a regression is a verdict, never an exception)
    "SpecperfError": ("core.errors", "SpecperfError"),
    "ConfigError": ("core.errors", "ConfigError"),
    "EndpointError": ("core.errors", "EndpointError"),
    "BaselineError": ("core.errors", "BaselineError"),
}

__all__ = [  # the names of _PUBLIC, spelled out for linters and type checkers
    "__version__", "Settings", "resolve", "Case", "TextClass", "load_text_classes", "plan",
    "generate_text", "PromptPlan", "PerfSession", "Measurement", "Sample", "step_repeats",
    "decide_repeats", "RepeatDecision", "fixed_ses", "SimProcess", "parse_metrics", "ContextFit",
    "fit_context", "fit_repeats", "attribute", "predict_tok_s", "summarize", "median_se",
    "NoiseModel", "RunNoise", "noise_from_history", "DRIFT_SCAN", "drift_series", "scan_drift",
    "DEFAULT_TOLERANCES", "Verdict", "NotJudged", "judge_case", "judge_fit", "pair_decider",
    "SweepCase", "SweepResult", "judge_sweep", "Baseline", "CaseBaseline", "BaselineStore",
    "RunInfo", "build_results", "write_results", "load_results", "render_report", "RunState",
    "judge_run_sweep", "sweep_budget", "SpecperfError", "ConfigError", "EndpointError",
    "BaselineError",
]


def __getattr__(name: str) -> Any:
    try:
        module, attribute = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module 'specperf' has no attribute {name!r}") from None
    value = getattr(import_module(f"{__name__}.{module}"), attribute)
    globals()[name] = value  # the next lookup is a plain attribute
    return value


def __dir__() -> list[str]:
    return sorted(__all__)


if TYPE_CHECKING:  # the same names, for type checkers and editors
    from .baselines.store import Baseline, BaselineStore, CaseBaseline
    from .core.drift import DRIFT_SCAN
    from .core.drift import scan_night as scan_drift
    from .core.drift import series as drift_series
    from .core.errors import BaselineError, ConfigError, EndpointError, SpecperfError
    from .core.interval import fixed_ses
    from .core.limits import DEFAULT_TOLERANCES
    from .core.model import ContextFit, attribute, fit_context, fit_repeats, predict_tok_s
    from .core.noise import NoiseModel, RunNoise
    from .core.noise import from_history as noise_from_history
    from .core.stats import median_se, summarize
    from .core.verdict import NotJudged, Verdict
    from .judge.fit import judge_fit
    from .judge.sweep.factor import CaseData as SweepCase
    from .judge.sweep.pooled import judge_sweep
    from .judge.sweep.verdict import SweepResult
    from .judge.verdict import judge_case
    from .measure.pair import pair_decider
    from .measure.repeats import RepeatDecision, decide_repeats
    from .measure.sample import Measurement, Sample, step_repeats
    from .measure.session import PerfSession
    from .plan.reuse import PromptPlan
    from .plan.workload import Case, TextClass, load_text_classes, plan
    from .plan.workload import generate as generate_text
    from .plugin.runstate import RunState
    from .plugin.sweeprun import budget as sweep_budget
    from .plugin.sweeprun import judge as judge_run_sweep
    from .record.files import write as write_results
    from .record.results import RunInfo
    from .record.results import build as build_results
    from .record.schema import load as load_results
    from .servers.acceptance import parse_metrics
    from .servers.simulated import SimProcess
    from .settings.config import Settings, resolve
    from .views.page import render as render_report
