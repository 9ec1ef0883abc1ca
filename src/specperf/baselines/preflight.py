"""``--require-baseline``: before the first generation request, every case the run will judge
has a baseline entry (and every class whose slope it judges, a fit).

The nightly job and the deploy gate run with it: a run that compares nothing must not pass,
and a gate must not spend minutes of GPU time before saying it had nothing to compare with.
The deployment is named from the server's GET routes only (no generation request).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..core.errors import BaselineError
from ..plan.workload import Case
from ..servers import simulated
from ..servers.client import Client
from ..servers.fingerprint import deployment_name
from ..servers.probe import identify
from ..settings.config import Settings
from ..settings.hints import create_hint
from .store import Baseline

REQUIRED = "--require-baseline"


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


def _names(items: Sequence[str]) -> str:
    unique = list(dict.fromkeys(items))
    return ", ".join(unique)
