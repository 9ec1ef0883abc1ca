"""A run's stop request: the signal that ends a run, kept until the run has acted on it.

The stop handler (plugin.signals.StopOnce) raises KeyboardInterrupt wherever the main thread
happens to be. Python swallows an exception raised inside a finalizer (a ``__del__``, a
weakref callback, a generator the garbage collector closes: "Exception ignored in ..."), so
a stop could be lost there and the run would go on measuring to the end with the signal
acknowledged. The measuring loops check the request before every request they send
(:func:`check`): a stop nobody has acted on yet is raised again there.
"""

from __future__ import annotations

_requested: int | None = None
_acted_on = False


def reset() -> None:
    """Forget any earlier request (a new session in the same process)."""
    global _requested, _acted_on
    _requested, _acted_on = None, False


def request(signum: int) -> None:
    """Note that signal ``signum`` asked the run to stop (the handler raises it too)."""
    global _requested
    if _requested is None:
        _requested = signum


def acted_on() -> None:
    """The run caught the interrupt and is closing: :func:`check` no longer raises."""
    global _acted_on
    _acted_on = True


def pending() -> bool:
    """Whether a stop was asked for and the run has not acted on it yet."""
    return _requested is not None and not _acted_on


def check() -> None:
    """Raise the stop again if it was asked for and lost before the run acted on it."""
    if pending():
        raise KeyboardInterrupt(f"specperf: stopped by signal {_requested}")
