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
    "Settings": ("config", "Settings"),
    "resolve": ("config", "resolve"),
    # what is measured, and measuring it
    "Case": ("workload", "Case"),
    "TextClass": ("workload", "TextClass"),
    "load_text_classes": ("workload", "load_text_classes"),
    "plan": ("workload", "plan"),
    "PerfSession": ("session", "PerfSession"),
    "Measurement": ("measure", "Measurement"),
    "Sample": ("measure", "Sample"),
    "step_repeats": ("measure", "step_repeats"),
    # the model: throughput = avg commit / step time
    "ContextFit": ("model", "ContextFit"),
    "fit_repeats": ("model", "fit_repeats"),
    "attribute": ("model", "attribute"),
    "predict_tok_s": ("model", "predict_tok_s"),
    # verdicts
    "DEFAULT_TOLERANCES": ("limits", "DEFAULT_TOLERANCES"),
    "Verdict": ("verdict", "Verdict"),
    "NotJudged": ("verdict", "NotJudged"),
    "judge_case": ("verdict", "judge_case"),
    "judge_fit": ("verdict", "judge_fit"),
    # baselines and results
    "Baseline": ("baseline", "Baseline"),
    "CaseBaseline": ("baseline", "CaseBaseline"),
    "BaselineStore": ("baseline", "BaselineStore"),
    "load_results": ("results", "load"),
    # errors (infrastructure problems; a regression is a verdict, never an exception)
    "SpecperfError": ("errors", "SpecperfError"),
    "ConfigError": ("errors", "ConfigError"),
    "EndpointError": ("errors", "EndpointError"),
    "BaselineError": ("errors", "BaselineError"),
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
    from .baseline import Baseline, BaselineStore, CaseBaseline
    from .config import Settings, resolve
    from .errors import BaselineError, ConfigError, EndpointError, SpecperfError
    from .limits import DEFAULT_TOLERANCES
    from .measure import Measurement, Sample, step_repeats
    from .model import ContextFit, attribute, fit_repeats, predict_tok_s
    from .results import load as load_results
    from .session import PerfSession
    from .verdict import NotJudged, Verdict, judge_case, judge_fit
    from .workload import Case, TextClass, load_text_classes, plan
