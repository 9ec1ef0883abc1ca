"""The real box: deploy a version with the user's command, wait until it serves, measure.

Lifecycle (owned here, explained once): ``open()`` takes the endpoint's GPU lock for the
whole bisect (a deploy is as exclusive as a measurement); ``deploy()`` runs the command
template with ``{version}`` substituted (shlex-split, no shell), then waits until ``/health``
answers 200 and the probed fingerprint holds what the version's line expects (an answer no
LLM server gives ends the wait at once, ``endpoint.py``); ``measure()``
takes more requests of each case through the suite's own measuring loop
(``measure.session.PerfSession``, one per deploy, its own lock off: this lab holds it);
``close()`` ends the session and releases the lock, always. ``on_box`` and ``deploying``
say what the box runs, for a bisect stopped half-way (``left()``).
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import ConfigError, NotAnLlmServer, SpecperfError
from ..measure import lock as gpulock
from ..measure.repeats import RepeatDecision
from ..measure.session import PerfSession
from ..plan.workload import Case
from ..servers.client import Client
from ..settings.config import Settings, resolve
from . import endpoint as probing
from .deploylog import Version, fingerprint_matches
from .search import DeployFailed, Measured, ServeFailed

PLACEHOLDER = "{version}"
# The figures each request gives the search (bisected factors and the headline).
BISECT_METRICS = ("avg_commit", "step_ms", "ttft_ms", "tok_s")
_POLL_S = 1.0
# The bisect flags that set the suite's options, so an error names what the user typed.
SPELLED = {"endpoint": "--endpoint", "contexts": "--contexts", "text_classes": "--classes",
           "output_tokens": "--output-tokens"}


def deploy_argv(template: str, version: str) -> list[str]:
    """The deploy command for ``version``: ``template`` shlex-split, ``{version}`` replaced."""
    try:
        words = shlex.split(template)
    except ValueError as exc:
        raise ConfigError(f"--deploy {template!r}: {exc}: quote it as a shell would.") from None
    if not words:
        raise ConfigError("--deploy is empty: give the command that deploys {version}.")
    if not any(PLACEHOLDER in w for w in words):
        raise ConfigError(f"--deploy {template!r} has no {PLACEHOLDER}: the command must be told "
                          "which version to deploy, e.g. --deploy 'ci/deploy.sh {version}'.")
    return [w.replace(PLACEHOLDER, version) for w in words]


def measuring_settings(endpoint: str, options: Mapping[str, str],
                       environ: Mapping[str, str]) -> Settings:
    """The suite's settings for a bisect's measurements (repeats decided by the search)."""
    cli = {"endpoint": endpoint, "repeats": "1", "max_repeats": "100000", **options}
    return resolve(cli, environ, {}, SPELLED)


def _stop_at(count: int) -> Callable[[Mapping[str, Sequence[float]]], RepeatDecision]:
    def decide(values: Mapping[str, Sequence[float]]) -> RepeatDecision:
        taken = max((len(v) for v in values.values()), default=0)
        return RepeatDecision("stop" if taken >= count else "more", f"{taken} of {count}")
    return decide


@dataclass
class BoxLab:
    """The lab of ``search.Search`` on a real (or simulated) endpoint; module docstring."""

    settings: Settings
    template: str
    deploy_timeout_s: float = 600.0
    progress: Callable[[str], None] = lambda _: None
    cases: list[Case] = field(default_factory=list)
    fingerprints: dict[str, dict[str, Any]] = field(default_factory=dict)
    deploy_s: float = 0.0
    simulated: bool = False  # the probe found a simulator: its times are simulated time
    on_box: str | None = None  # the version the box serves, known healthy
    deploying: str | None = None  # the version whose deploy is under way (or failed)
    _session: PerfSession | None = None
    _lock: gpulock.GpuLock | None = None

    def __post_init__(self) -> None:
        s = self.settings
        self.cases = [Case(c, ctx, s.output_tokens) for c in s.text_classes for ctx in s.contexts]

    @property
    def endpoint(self) -> str:
        return self.settings.endpoint or ""

    def open(self) -> None:
        """Take the endpoint's GPU lock for the whole bisect."""
        self._lock = gpulock.GpuLock(gpulock.lock_path(self.settings),
                                     timeout_s=self.settings.gpu_lock_timeout,
                                     endpoint=self.endpoint, progress=self.progress)
        self._lock.acquire()

    def close(self) -> None:
        try:
            self._end_session()
        finally:
            if self._lock is not None:
                self._lock.release()

    def _end_session(self) -> None:
        if self._session is not None:
            session, self._session = self._session, None
            session.close()

    def left(self, restore: Version | None) -> str:
        """What the box runs now, for a bisect that stops half-way (``restore``: the version
        it should run again, None for ``--restore none``)."""
        command = "" if restore is None else shlex.join(deploy_argv(self.template, restore.name))
        back = "" if restore is None else f"deploy {restore.name} again with `{command}`"
        if self.deploying is not None:
            fix = back or "--restore none: deploy what it should run by hand"
            return f"during the deploy of {self.deploying}: what the box runs is unknown; {fix}"
        if self.on_box is None:
            return "before any deploy: the box runs what it ran before"
        if restore is None:
            return f"the box runs {self.on_box} (--restore none)"
        if restore.name == self.on_box:
            return f"the box runs {self.on_box}, what it ran before"
        return f"the box runs {self.on_box}, not {restore.name}; {back}"

    # -- deploying ------------------------------------------------------------------------
    def deploy(self, version: Version) -> None:
        """Run the deploy command, then wait for health and the expected fingerprint."""
        self._end_session()
        started = time.monotonic()
        self.on_box, self.deploying = None, version.name
        try:
            self._run_command(version)
            deadline = started + self.deploy_timeout_s
            self._wait_healthy(deadline)
            self._session = self._wait_fingerprint(version, deadline)
            self.on_box, self.deploying = version.name, None
        finally:
            self.deploy_s += time.monotonic() - started

    def _run_command(self, version: Version) -> None:
        argv = deploy_argv(self.template, version.name)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, check=False,
                                  timeout=self.deploy_timeout_s)
        except subprocess.TimeoutExpired:
            raise DeployFailed(f"the deploy command ran over {self.deploy_timeout_s:g} s") \
                from None
        except OSError as exc:
            raise DeployFailed(f"the deploy command could not start ({exc.strerror or exc})") \
                from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            tail = f": {said[-1]}" if said else ""
            raise DeployFailed(f"the deploy command exited {done.returncode}{tail}")

    def _wait_healthy(self, deadline: float) -> None:
        client = Client(self.endpoint, retries=0, timeout_s=10.0)
        last = "no answer"
        try:
            while True:
                try:
                    probing.check_health(client)
                    return
                except NotAnLlmServer as exc:
                    if not probing.passing(exc):
                        raise  # no LLM server answers there: waiting cannot change that
                    last = probing.why(exc)
                except SpecperfError as exc:
                    last = probing.why(exc)
                if time.monotonic() >= deadline:
                    raise DeployFailed(f"the server did not answer /health with 200 within "
                                       f"{self.deploy_timeout_s:g} s (last: {last})")
                time.sleep(_POLL_S)  # the server restarts on its own time: poll, bounded
        finally:
            client.close()

    def _wait_fingerprint(self, version: Version, deadline: float) -> PerfSession:
        while True:
            session = PerfSession(self.settings, progress=self.progress, lock_mode="none")
            try:
                server = session.start()
            except NotAnLlmServer:
                session.close()
                raise
            except SpecperfError as exc:
                session.close()
                raise DeployFailed(f"the server did not serve: {str(exc).splitlines()[0]}") \
                    from None
            wrong = fingerprint_matches(version.expected_fingerprint, server.fingerprint)
            if not wrong:
                self.fingerprints[version.name] = dict(server.fingerprint)
                self.simulated = self.simulated or server.simulated
                return session
            session.close()
            if time.monotonic() >= deadline:
                raise DeployFailed(f"the server does not report {version.name}'s fingerprint "
                                   f"({'; '.join(wrong)}) {self.deploy_timeout_s:g} s after "
                                   "its deploy")
            time.sleep(_POLL_S)

    # -- measuring ------------------------------------------------------------------------
    def measure(self, version: Version, repeats: int) -> Measured:
        """``repeats`` more requests per case, plus each case's warm-ups (charged too)."""
        if self._session is None:
            raise DeployFailed(f"{version.name} is not deployed")
        figures: dict[str, dict[str, list[float]]] = {}
        gpu_s = 0.0
        for case in self.cases:
            try:
                m = self._session.measure(case, _stop_at(repeats))
            except SpecperfError as exc:
                raise ServeFailed(f"the server failed to serve {case.id}: "
                                   f"{str(exc).splitlines()[0]}") from None
            gpu_s += sum(s.wall_s for s in m.samples)
            figures[case.id] = {name: [v for s in m.measured if (v := s.metric(name)) is not None]
                                for name in BISECT_METRICS}
        return Measured(figures, gpu_s)
