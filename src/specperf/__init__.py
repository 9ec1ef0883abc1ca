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

__version__ = "0.1.0"

# name -> (module, attribute): the one documented API.
_PUBLIC: dict[str, tuple[str, str]] = {
    # settings
    "Settings": ("settings.config", "Settings"),
    "resolve": ("settings.config", "resolve"),
    # what is measured, and measuring it
    "Case": ("plan.workload", "Case"),
    "TextClass": ("plan.workload", "TextClass"),
    "load_text_classes": ("plan.workload", "load_text_classes"),
    "plan": ("plan.workload", "plan"),
    "PerfSession": ("measure.session", "PerfSession"),
    "Measurement": ("measure.loop", "Measurement"),
    "Sample": ("measure.loop", "Sample"),
    "step_repeats": ("measure.loop", "step_repeats"),
    # the model: throughput = avg commit / step time
    "ContextFit": ("core.model", "ContextFit"),
    "fit_repeats": ("core.model", "fit_repeats"),
    "attribute": ("core.model", "attribute"),
    "predict_tok_s": ("core.model", "predict_tok_s"),
    # verdicts
    "DEFAULT_TOLERANCES": ("core.limits", "DEFAULT_TOLERANCES"),
    "Verdict": ("judge.verdict", "Verdict"),
    "NotJudged": ("judge.verdict", "NotJudged"),
    "judge_case": ("judge.verdict", "judge_case"),
    "judge_fit": ("judge.verdict", "judge_fit"),
    # baselines and results
    "Baseline": ("baselines.store", "Baseline"),
    "CaseBaseline": ("baselines.store", "CaseBaseline"),
    "BaselineStore": ("baselines.store", "BaselineStore"),
    "load_results": ("record.results", "load"),
    # errors (infrastructure problems; a regression is a verdict, never an exception)
    "SpecperfError": ("core.errors", "SpecperfError"),
    "ConfigError": ("core.errors", "ConfigError"),
    "EndpointError": ("core.errors", "EndpointError"),
    "BaselineError": ("core.errors", "BaselineError"),
}

__all__ = [  # the names of _PUBLIC, spelled out for linters and type checkers
    "__version__", "Settings", "resolve", "Case", "TextClass", "load_text_classes", "plan",
    "PerfSession", "Measurement", "Sample", "step_repeats", "ContextFit", "fit_repeats",
    "attribute", "predict_tok_s", "DEFAULT_TOLERANCES", "Verdict", "NotJudged", "judge_case",
    "judge_fit", "Baseline", "CaseBaseline", "BaselineStore", "load_results", "SpecperfError",
    "ConfigError", "EndpointError", "BaselineError",
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
    from .core.errors import BaselineError, ConfigError, EndpointError, SpecperfError
    from .core.limits import DEFAULT_TOLERANCES
    from .core.model import ContextFit, attribute, fit_repeats, predict_tok_s
    from .judge.verdict import NotJudged, Verdict, judge_case, judge_fit
    from .measure.loop import Measurement, Sample, step_repeats
    from .measure.session import PerfSession
    from .plan.workload import Case, TextClass, load_text_classes, plan
    from .record.results import load as load_results
    from .settings.config import Settings, resolve
