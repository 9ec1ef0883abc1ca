"""The simulator's reference baseline, shipped in the package.

``pytest --pyargs specperf.perf_tests -m context_scaling`` run from any directory after
``pip install specperf`` measures the embedded simulator; with no baseline directory of its
own it would judge nothing. The package carries the simulator's reference baseline
(``reference/<deployment>/v<N>.json``; in a checkout ``baselines/sim-kimi-k26-ddtree`` is a
link to it, so ``--update-baselines`` there writes the next shipped version), and a run of the
embedded simulator reads it when the user gave no ``--baseline-dir`` and the default one
holds no baseline of the simulated deployment. A user's own baseline always wins, and a
baseline-writing run always writes into the user's directory, never into the package.
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
            or settings.update_baselines
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
