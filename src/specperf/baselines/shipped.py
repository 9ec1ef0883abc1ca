"""The simulator's reference baseline, shipped in the package.

``pytest --pyargs specperf.perf_tests -m context_scaling`` run from any directory after
``pip install specperf`` measures the embedded simulator; with no baseline directory of its
own it would judge nothing. The package carries the simulator's reference baseline
(``reference/<deployment>/v<N>.json``; in a checkout ``baselines/sim-kimi-k26-ddtree`` is a
link to it, so ``--update-baselines`` there writes the next shipped version), and a run of the
embedded simulator reads it when the user gave no ``--baseline-dir``, the default one holds no
baseline of the simulated deployment, and the run sends the requests the reference was
measured with (its route, output length and built-in text classes). A user's own baseline
always wins, and a baseline-writing run writes into the user's directory, never the package.
"""

from __future__ import annotations

from pathlib import Path

from ..settings.config import Settings
from .store import BaselineStore

REFERENCE = Path(__file__).resolve().parent / "reference"


def directory(settings: Settings, deployment: str) -> Path:
    """Where a run reads ``deployment``'s baselines: the settings' directory, or the shipped
    reference when this run is the embedded simulator's and that directory has none."""
    if (settings.endpoint is not None or settings.compare_endpoint is not None
            or settings.update_baselines or not _as_shipped(settings)
            or settings.sources.get("baseline_dir", "default") != "default"):
        return settings.baseline_dir
    if BaselineStore(settings.baseline_dir).latest(deployment) is not None:
        return settings.baseline_dir
    if BaselineStore(REFERENCE).latest(deployment) is None:
        return settings.baseline_dir
    return REFERENCE


def is_reference(path: Path) -> bool:
    """Whether ``path`` is the shipped reference directory."""
    return path.resolve() == REFERENCE


def _as_shipped(settings: Settings) -> bool:
    """The run sends the requests the reference was measured with (route, model, output
    length, built-in text classes): any other request digest would refuse to compare with it
    (plan/digest.py), and a run of other requests is better skipped as not judged."""
    default = Settings()
    return (settings.api, settings.model, settings.output_tokens, settings.text_class_dir) == \
        (default.api, default.model, default.output_tokens, default.text_class_dir)
