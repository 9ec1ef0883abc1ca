"""The public surface in specperf/__init__.py: every documented name resolves, the package
imports nothing heavy until a name is used, and the docstring's recipe measures."""

from __future__ import annotations

import subprocess
import sys

import specperf


def test_every_public_name_resolves_to_its_module_attribute() -> None:
    assert sorted(specperf.__all__) == sorted(["__version__", *specperf._PUBLIC])
    for name in specperf.__all__:
        assert getattr(specperf, name) is not None, name
    assert specperf.load_results.__module__ == "specperf.record.schema"
    assert sorted(dir(specperf)) == sorted(specperf.__all__)


def test_an_unknown_name_is_an_attribute_error() -> None:
    try:
        specperf.measure_everything  # noqa: B018
    except AttributeError as exc:
        assert str(exc) == "module 'specperf' has no attribute 'measure_everything'"
    else:
        raise AssertionError("no AttributeError")


def test_importing_the_package_loads_neither_numpy_nor_httpx() -> None:
    code = ("import sys, specperf; print(sorted(m for m in "
            "('numpy', 'httpx', 'specperf.plugin.runstate') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert out == "[]"


def test_the_docstring_recipe_measures_the_embedded_simulator() -> None:
    # Slow simulated time (0.25) and far-apart contexts: a loaded box's jitter stays far
    # below the 58 ms the step grows from 13 to 3333 tokens.
    settings = specperf.resolve({"output_tokens": "64", "contexts": "13,3333", "repeats": "2",
                                 "warmup": "0", "sim_time_scale": "0.25"}, {}, {})
    session = specperf.PerfSession(settings, lock_mode="none")
    try:
        runs = [session.measure(specperf.Case("reasoning", n, 64)) for n in (13, 3333)]
    finally:
        session.close()
    assert session.sim is not None and session.sim.proc is not None
    assert session.sim.proc.poll() is not None  # closed: the simulator is gone
    fit = specperf.fit_repeats([(m.mean_context, specperf.step_repeats(m)) for m in runs])
    assert fit is not None and fit.b_ms_per_1k > 0  # step time grows with context
    assert all(len(m.measured) >= 2 for m in runs)
