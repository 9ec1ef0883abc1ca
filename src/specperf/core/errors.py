"""The exceptions specperf raises, in one tree.

Every message says what happened, with the values involved, and what to do next.
Third-party exceptions (httpx, filelock) are translated at one boundary each
(``client.py``, ``lock.py``) and chained with ``raise ... from exc``.

::

    SpecperfError                 base of everything below
    ├── ConfigError               a bad option value, env variable, ini key or file
    ├── EndpointError             the server could not give a usable answer
    │   ├── EndpointUnreachable   connection refused, DNS failure
    │   ├── EndpointTimeout       no complete answer within the request timeout
    │   ├── BadStatus             HTTP 4xx/5xx (``status`` and ``body`` kept)
    │   ├── MalformedResponse     not JSON, or a needed field missing or inconsistent
    │   ├── NotAnLlmServer        up, but no LLM server (a web server, a proxy's error page):
    │   │                         a usage error of the endpoint setting, not an outage
    │   └── IgnoreEosNotHonoured  fewer tokens than requested, or finish reason not "length"
    ├── AcceptanceUnavailable     the chosen acceptance source gives no step count
    ├── ImpossibleSample          figures the server cannot physically produce (avg commit
    │                             outside [1, draft tokens + 1], more steps than tokens, a
    │                             step time not above 0, counters that contradict each other)
    ├── ContaminatedMeasurement   other requests ran on the server during a measurement
    │   ├── PrefixCacheHit        the prefix cache served prompt past the unique nonce
    │   └── DegenerateOutput      the output collapsed into a loop (inflates acceptance)
    ├── UnstableMeasurement       spread too large to pass or fail on
    ├── BaselineError             baseline missing, corrupt, wrong schema or conflicting
    ├── GpuLockTimeout            another run held the GPU lock for too long
    ├── StoreError                the results store (store/) cannot be opened, migrated,
    │                             read or written: the database is down or the URL wrong
    └── PublishError              a dashboard output of the run (Prometheus textfile,
                                  Pushgateway) cannot be written or pushed

In a pytest run every one of these is an *error* of the case (infrastructure),
never a *failure*; failures are reserved for performance regressions.
"""

from __future__ import annotations


class SpecperfError(Exception):
    """Base class: an infrastructure problem that makes a measurement impossible."""


class ConfigError(SpecperfError):
    """A setting has a value specperf cannot use."""


class EndpointError(SpecperfError):
    """The server did not give a usable answer."""

    def __init__(self, message: str, *, url: str = "", transient: bool = False) -> None:
        super().__init__(message)
        self.url = url
        self.transient = transient


class EndpointUnreachable(EndpointError):
    """No connection could be made."""


class EndpointTimeout(EndpointError):
    """The server did not answer in time."""


class BadStatus(EndpointError):
    """The server answered with an HTTP error status."""

    def __init__(self, message: str, *, url: str = "", status: int = 0, body: str = "") -> None:
        super().__init__(message, url=url, transient=status >= 500)
        self.status = status
        self.body = body


class MalformedResponse(EndpointError):
    """The answer was not JSON, or a needed field was missing or inconsistent."""


class NotAnLlmServer(EndpointError):
    """The endpoint answers, but it is not an LLM server: the setting points elsewhere."""


class IgnoreEosNotHonoured(EndpointError):
    """The server stopped before the requested number of tokens."""


class AcceptanceUnavailable(SpecperfError):
    """No working source of verify-step counts."""


class ImpossibleSample(SpecperfError):
    """A sample's figures lie outside what the server can physically produce: not judged."""


class UnmeasuredComparison(SpecperfError):
    """A path comparison (chat vs native, stream vs non-stream) lacks a figure it needs."""


class ContaminatedMeasurement(SpecperfError):
    """Other requests ran on the server while a measurement was taken."""


class PrefixCacheHit(ContaminatedMeasurement):
    """The prefix cache served part of the prompt past the unique nonce, hiding prefill."""


class DegenerateOutput(ContaminatedMeasurement):
    """The output collapsed into a loop, which inflates acceptance."""


class UnstableMeasurement(SpecperfError):
    """The samples of a case spread too widely to judge."""


class BaselineError(SpecperfError):
    """A baseline file is missing, corrupt, of the wrong schema, or conflicting."""


class GpuLockTimeout(SpecperfError):
    """The GPU lock stayed held by another run past the timeout."""

    def __init__(self, message: str, *, lock_file: str = "", holder: str = "") -> None:
        super().__init__(message)
        self.lock_file = lock_file
        self.holder = holder


class StoreError(SpecperfError):
    """The results database cannot be reached, migrated, read or written (``url`` kept,
    without a password)."""

    def __init__(self, message: str, *, url: str = "") -> None:
        super().__init__(message)
        self.url = url


class PublishError(SpecperfError):
    """The run's outcome could not be written for Prometheus or pushed to a Pushgateway."""
