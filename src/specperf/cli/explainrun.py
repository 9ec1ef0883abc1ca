"""``specperf explain``'s use case: identify the live server, load its deployment's baseline,
read /metrics over the window (or take the figures a dashboard showed), and have the judge
explain the observation. The views (:mod:`specperf.views.explaincard`) only render the
outcome.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..core.errors import BaselineError, ConfigError
from ..core.fingerprint import deployment_for
from ..core.noise import NoiseModel
from ..judge.explain import explanation as judge
from ..judge.explain import prediction
from ..judge.explain.explanation import Outcome
from ..judge.explain.observation import Observation
from ..servers import livemetrics, probe
from ..servers.client import Client
from ..settings.hints import perf_command
from ..settings.options import OPTIONS_BY_NAME
from ..views.explaincard import SIMULATED


@dataclass(frozen=True)
class Server:
    """The live form's server as its GET routes name it (no generation request)."""

    url: str
    deployment: str  # named by its fingerprint, as the gate and the main job name it
    simulated: bool

    @property
    def label(self) -> str:
        """How the run history labels this box (a simulator: 'SIMULATED (url)')."""
        return f"{SIMULATED} ({self.url})" if self.simulated else self.url


def identify(endpoint: str) -> Server:
    """Check ``endpoint`` is an LLM server (NotAnLlmServer when it is not, before any
    /metrics reading) and name its deployment from its fingerprint."""
    client = Client(endpoint, retries=0)
    try:
        found = probe.identify(client, simulated=False, endpoint_source="--endpoint")
    finally:
        client.close()
    profile = str(OPTIONS_BY_NAME["sim_profile"].default)
    return Server(client.base_url, deployment_for(None, profile, found),
                  bool(found["simulated"]))


def _load(root: Path, deployment: str, endpoint: str | None) -> tuple[Any, Any]:
    """The deployment's baseline; none yet is one sentence with the command that writes it
    for this server and this deployment name, working as printed."""
    try:
        return prediction.load(root, deployment)
    except BaselineError as exc:
        if any((root / deployment).glob("v*.json")):  # there is one: unreadable, not missing
            raise
        where = [] if root == Path("baselines") else ["--specperf-baseline-dir", str(root)]
        command = perf_command("-m", "context_scaling", "--specperf-endpoint",
                               endpoint or "URL", "--specperf-deployment", deployment, *where,
                               "--specperf-update-baselines")
        url = "" if endpoint else " (URL: the deployment's server)"
        raise BaselineError(f"no baseline for deployment {deployment!r} in {root / deployment}: "
                            f"create one with `{command}` against a quiet server{url}.") from exc


def offline(root: Path, deployment: str, text_class: str, context: float, tok_s: float, *,
            avg_commit: float | None = None, concurrency: float = 1.0,
            output_tokens: int | None = None, noise: NoiseModel | None = None) -> Outcome:
    """Explain figures a dashboard showed (``--observed-tok-s``, ``--observed-commit``)."""
    baseline, conc = _load(root, deployment, None)
    sources = {"tok_s": "--observed-tok-s", "context": "--context"}
    if avg_commit is not None:
        sources["avg_commit"] = "--observed-commit"
    obs = Observation(text_class, context, tok_s, avg_commit, None, output_tokens, concurrency,
                      sources)
    return Outcome(judge.explain(baseline, obs, noise=noise, conc=conc))


def live(root: Path, deployment: str, server: Server | str, window_s: float, *,
         text_class: str | None = None, context: float | None = None,
         noise: NoiseModel | None = None, poll_s: float = 1.0) -> Outcome:
    """Read the server's /metrics over ``window_s`` and explain what production did
    (``server``: :func:`identify`'s, or a URL it is then called on)."""
    if isinstance(server, str):
        server = identify(server)
    baseline, conc = _load(root, deployment, server.url)
    if text_class is not None:
        # an unknown class before the window, not after
        prediction.class_cases(baseline, text_class)
    client = Client(server.url, retries=0)
    try:
        seen = livemetrics.observe(client, window_s, poll_s=poll_s, context=context)
    finally:
        client.close()
    ctx = context if context is not None else seen.context
    if math.isnan(ctx):
        raise ConfigError(f"{seen.family} does not export the prompt length of its "
                                f"requests: give --context (the traffic's prompt tokens).")
    output = None if math.isnan(seen.output_tokens) else max(2, round(seen.output_tokens))
    notes: list[str] = []
    if text_class is None:
        text_class, why = prediction.closest_class(baseline, ctx, output or 600, seen.avg_commit)
        notes.append(why)
    sources = dict(seen.sources)
    if context is not None:
        sources["context"] = "--context"
    obs = Observation(text_class, ctx, seen.tok_s, seen.avg_commit, seen.step_ms, output,
                      seen.concurrency, sources)
    return Outcome(judge.explain(baseline, obs, noise=noise, conc=conc), seen, tuple(notes),
                   server.simulated)
