"""``--require-baseline``: before the first generation request, every case the run will judge
has a baseline entry (and every class whose slope it judges, a fit).

The nightly job and the deploy gate run with it: a run that compares nothing must not pass,
and a gate must not spend minutes of GPU time before saying it had nothing to compare with.
The deployment is named from the server's GET routes only (no generation request).

Without it, a ``--deployment`` that has no baseline while the directory holds others is
refused the same way (:func:`check_named`): most likely a typo, which would otherwise measure
the whole sweep and judge nothing.
"""

from __future__ import annotations

import difflib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import BaselineError, ConfigError
from ..core.fingerprint import deployment_name
from ..plan.workload import Case
from ..servers import simulated
from ..servers.client import Client
from ..servers.probe import identify
from ..settings.config import Settings
from ..settings.hints import create_hint, update_command
from .store import Baseline, BaselineStore

REQUIRED = "--specperf-require-baseline"


@dataclass(frozen=True)
class Judged:
    """What a run will judge against the baseline: cases (their medians), classes (their fit)."""

    cases: tuple[Case, ...] = ()
    fit_classes: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.cases or self.fit_classes)


def deployment_before_probe(settings: Settings) -> str:
    """The baseline deployment of a run, named without sending a generation request."""
    if settings.deployment:
        return settings.deployment
    if settings.endpoint is None:
        profile = simulated.profile_name(settings.sim_profile)
        return deployment_name(settings, {"simulated": True,
                                          "fingerprint": {"sim_profile": profile}})
    client = Client(settings.endpoint, api_key=settings.api_key(),
                    timeout_s=settings.request_timeout)
    try:
        server = identify(client, simulated=False,
                          endpoint_source=settings.sources.get("endpoint", "--endpoint"))
    finally:
        client.close()
    return deployment_name(settings, server)


def check(settings: Settings, judged: Judged, deployment: str, base: Baseline | None) -> None:
    """Raise BaselineError naming every judged case or fit ``base`` lacks, with the fix.

    ``base``: the run's baseline of ``deployment`` (RunState loads it, once), None when the
    deployment has none.
    """
    hint = create_hint(settings, deployment)
    if base is None:
        raise BaselineError(f"{REQUIRED}: no baseline for deployment {deployment!r} in "
                            f"{settings.baseline_dir}, so no case can be judged: {hint}.")
    missing = [c.id for c in judged.cases
               if c.id not in base.cases or base.cases[c.id].output_tokens != c.output_tokens]
    fits = [name for name in judged.fit_classes if name not in base.fits]
    if not missing and not fits:
        return
    what = []
    if missing:
        output = judged.cases[0].output_tokens
        what.append(f"no {_names(missing)} at {output} output tokens")
    if fits:
        what.append(f"no {_names(fits)} context fit")
    fix = hint.replace("create one", "write a new version")
    raise BaselineError(f"{REQUIRED}: baseline {deployment} v{base.version} has "
                        f"{' and '.join(what)}: {fix}.")


def check_named(settings: Settings, root: Path) -> None:
    """Raise BaselineError when a named ``--deployment`` has no baseline in ``root`` while
    others do: most likely a typo, and a run that would measure everything to judge nothing.

    Only a name someone gave (``--deployment``, its variable or ini key): a deployment named
    from the server's fingerprint has no baseline the first time, and is skipped as usual.
    """
    deployment = settings.deployment
    if not deployment or settings.update_baselines:
        return
    store = BaselineStore(root)
    if store.latest(deployment) is not None:
        return
    others = existing_deployments(root)
    if not others:
        return
    close = difflib.get_close_matches(deployment, others, n=1, cutoff=0.6)
    guess = f" (did you mean {close[0]!r}?)" if close else ""
    source = settings.sources.get("deployment", "--deployment")
    raise BaselineError(
        f"no baseline for {deployment!r}; baselines exist for: {', '.join(others)}{guess}. "
        f"Correct {source}, or write the first baseline of {deployment!r} in {root} with "
        f"`{update_command(settings, deployment)}`.")


def existing_deployments(root: Path) -> list[str]:
    """The deployments with at least one baseline version in ``root``, sorted."""
    if not root.is_dir():
        return []
    store = BaselineStore(root)
    found = []
    for entry in sorted(root.iterdir()):
        try:
            if entry.is_dir() and store.latest(entry.name) is not None:
                found.append(entry.name)
        except ConfigError:  # a directory whose name is no deployment's
            continue
    return found


def _names(items: Sequence[str]) -> str:
    unique = list(dict.fromkeys(items))
    return ", ".join(unique)
